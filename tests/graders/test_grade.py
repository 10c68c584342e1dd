"""The grading entry points where no GPU is needed: compile failures, no GPU, bookkeeping."""

from __future__ import annotations

import json

import pytest

from graders import grade
from graders.gpu import gpu_unavailable_reason
from graders.results import CaseResult, CompileResult, TimingStats
from graders.run import stage
from graders.spec import load_builtin_lab

SECRET = "test-secret"


def test_a_submission_that_did_not_compile_runs_nothing() -> None:
    lab = load_builtin_lab("vector-scale")
    compiled = CompileResult(
        ok=False, message="The compiler reported 1 error.", reason="compile_error"
    )
    report = grade.run_submission(lab, "garbage", compiled=compiled, secret=SECRET)
    assert report.error == "compile_error"
    assert report.score == 0 and report.max_score == lab.max_score
    assert [c.verdict for c in report.cases] == ["not_run"] * len(lab.cases)
    assert all(c.seed > 0 for c in report.cases)
    assert report.summary == "The compiler reported 1 error."


@pytest.mark.skipif(gpu_unavailable_reason() is None, reason="this machine has a GPU")
def test_without_a_gpu_the_report_says_running_waits_for_one() -> None:
    lab = load_builtin_lab("vector-scale")
    report = grade.grade_source(lab, lab.reference("one-per-thread").source, secret=SECRET)
    assert report.error == "no_gpu"
    assert report.stage_seconds["compile"] > 0
    assert report.summary.startswith("Compiled; running waits for a GPU worker.")
    assert all(c.verdict == "not_run" for c in report.cases)


def test_hidden_cases_get_seeds_that_depend_on_the_secret() -> None:
    lab = load_builtin_lab("vector-scale")
    compiled = CompileResult(ok=False, message="x", reason="compile_error")
    one = grade.run_submission(lab, "", compiled=compiled, secret="one")
    two = grade.run_submission(lab, "", compiled=compiled, secret="two")
    for a, b in zip(one.cases, two.cases, strict=True):
        assert (a.seed == b.seed) != a.hidden


def test_references_compile_even_where_they_break_the_labs_requires() -> None:
    lab = load_builtin_lab("matmul-tiled")
    assert "__shared__" in lab.requires
    compiled = grade.compile_reference(lab, "naive", arch="sm_90")
    assert compiled.ok, compiled.message
    assert compiled.cubin


def test_progress_records_tell_finished_cases_from_the_running_one() -> None:
    case = CaseResult(
        name="n-1",
        sizes={"n": 1},
        hidden=False,
        passed=True,
        verdict="pass",
        message="ok",
        timing=TimingStats(1.0, 0.9, 1.0, 0.1, 10, 0.01, gpu="H100", reused=True),
    )
    announced: list[list[CaseResult]] = []
    follow = stage._Follow(["n-1", "n-1000"], {}, announced.append)
    for record in ({"start": "n-1"}, {"done": case.to_dict()}, {"start": "n-1000"}):
        follow(json.loads(json.dumps(record)))
    assert follow.running == "n-1000"
    assert follow.done["n-1"] == case
    follow({"done": {**case.to_dict(), "name": "n-1000"}})
    follow({"phase": "timing"})
    follow({"phase": "timing"})
    assert [[c.name for c in cases] for cases in announced] == [["n-1", "n-1000"]]


def test_the_sanitizers_case_runs_first() -> None:
    lab = load_builtin_lab("matmul-tiled")
    order = stage.case_order(lab)
    assert order[0] == lab.sanitizer_case
    assert sorted(order) == sorted(c.name for c in lab.cases)


def test_static_barrier_warning_becomes_a_finding_with_its_line() -> None:
    compiled = CompileResult(
        ok=True,
        message="",
        warnings=[
            "Line 29: `__syncthreads()` is inside `if (row < m)` (the barrier problem).",
        ],
    )
    [finding] = grade._static_findings(compiled)
    assert finding.tool == "static" and finding.kind == "divergent_barrier"
    assert finding.line == 29
