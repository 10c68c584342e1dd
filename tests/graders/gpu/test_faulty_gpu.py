"""Each known-faulty kernel gets the verdict, case, finding and message its header promises."""

from __future__ import annotations

import pytest

from graders.compile.compiler import compile_submission
from graders.grade import run_submission
from graders.labcheck.gpu import run_stage_gaps
from graders.spec import load_builtin_lab

from .faults import SANITIZER_FINDINGS, Expectation, all_expectations

SECRET = "kernelgrader-test-secret"
EXPECTATIONS = all_expectations()


@pytest.mark.gpu
@pytest.mark.parametrize("exp", EXPECTATIONS, ids=[e.id for e in EXPECTATIONS])
def test_faulty_kernel_gets_its_verdict(exp: Expectation) -> None:
    lab = load_builtin_lab(exp.lab)
    gaps = run_stage_gaps(lab)
    if gaps and not exp.compile_stage:
        pytest.skip(f"the run stage cannot run {', '.join(gaps)} yet (issue 12, phase 2)")
    source = exp.path.read_text(encoding="utf-8")
    compiled = compile_submission(lab, source, filename=exp.path.name)
    if exp.compile_stage:
        assert not compiled.ok, f"{exp.id} compiled, but should stop with {exp.verdict}"
        assert compiled.reason == exp.verdict, compiled.message
        if exp.message:
            assert exp.message in f"{compiled.message}\n{compiled.log}"
        return
    assert compiled.ok, f"{exp.id} should compile: {compiled.message}\n{compiled.log}"
    static = set(compiled.warnings)
    needs_sanitizer = exp.finding in SANITIZER_FINDINGS
    report = run_submission(
        lab, source, compiled=compiled, secret=SECRET, sanitizer=needs_sanitizer, timing=False
    )
    by_name = {c.name: c for c in report.cases}
    detail = "\n".join(f"  {c.name}: {c.verdict}: {c.message}" for c in report.cases)
    failing = [c for c in report.cases if not c.passed]
    if exp.fail_case:
        case = by_name[exp.fail_case]
        assert not case.passed and case.verdict == exp.verdict, detail
    elif exp.finding:
        # A race may or may not corrupt a given run; where a case fails, it fails this way,
        # and the sanitizer's case carries the sanitizer's verdict.
        others = [c for c in failing if c.name != lab.sanitizer_case]
        assert all(c.verdict == exp.verdict for c in others), detail
    else:
        assert any(c.verdict == exp.verdict for c in report.cases), detail
    if exp.pass_case:
        assert by_name[exp.pass_case].passed, detail
    if exp.message:
        texts = [c.message for c in failing] + [report.summary]
        assert any(exp.message in t for t in texts), detail
    if needs_sanitizer and lab.sanitizer_case:
        ruled = by_name[lab.sanitizer_case]
        assert not ruled.passed, detail
    if exp.finding:
        kinds = {f.kind for f in report.findings}
        assert exp.finding in kinds, (
            f"findings {[(f.tool, f.kind, f.line) for f in report.findings]}; "
            f"static warnings {static}; log: {report.stdout[-2000:]}"
        )
    assert report.performance_points == 0
    assert report.score < lab.max_score
