"""Each known-faulty kernel gets the verdict, case, finding and message its header promises.

The header is read, and the outcome judged, by graders.labcheck.faults: the same code that
`lab check` uses, so the two cannot disagree about what a header means.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from graders.compile.compiler import compile_submission
from graders.grade import run_submission
from graders.labcheck.check import outcome_of_compile
from graders.labcheck.faults import (
    Outcome,
    compile_problem,
    faulty_files,
    read_fault_header,
    run_problem,
)
from graders.spec import builtin_labs_dir, list_builtin_labs, load_builtin_lab

SECRET = "kernelgrader-test-secret"
FAULTY = [
    (lab, path) for lab in list_builtin_labs() for path in faulty_files(builtin_labs_dir() / lab)
]


@pytest.mark.gpu
@pytest.mark.parametrize(("lab_id", "path"), FAULTY, ids=[f"{a}/{p.name}" for a, p in FAULTY])
def test_faulty_kernel_gets_its_verdict(lab_id: str, path: Path) -> None:
    lab = load_builtin_lab(lab_id)
    exp = read_fault_header(path, {c.name for c in lab.cases}, sanitizer=lab.sanitizer)
    source = path.read_text(encoding="utf-8")
    compiled = compile_submission(lab, source, filename=path.name, line_info=True)
    problem = compile_problem(exp, outcome_of_compile(compiled))
    assert problem is None, f"{problem}\n{compiled.log}"
    if exp.compile_stage:
        return
    report = run_submission(
        lab, source, compiled=compiled, secret=SECRET, sanitizer=exp.needs_sanitizer, timing=False
    )
    assert report.error == "", report.summary
    outcome = Outcome(
        compile_reason="",
        compile_text="",
        warnings=tuple(compiled.warnings),
        cases=tuple((c.name, c.passed, c.verdict, c.message) for c in report.cases),
        findings=tuple(f.kind for f in report.findings),
        summary=report.summary,
    )
    detail = "\n".join(f"  {c.name}: {c.verdict}: {c.message}" for c in report.cases)
    findings = [(f.tool, f.kind, f.line) for f in report.findings]
    problem = run_problem(exp, outcome)
    assert problem is None, f"{problem}\n{detail}\nfindings: {findings}\n{report.stdout[-2000:]}"
    if exp.needs_sanitizer and lab.sanitizer_case:
        assert not next(c for c in report.cases if c.name == lab.sanitizer_case).passed, detail
    assert report.performance_points == 0
    assert report.score < lab.max_score
