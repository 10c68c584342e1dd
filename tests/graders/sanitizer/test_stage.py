"""The sanitizer stage's parent side without a GPU: the job it hands the tools' child, and what
each way the child can end does to the case, the report and the submission's budget.

The child itself (compute-sanitizer on a GPU) is replaced by `run_sandboxed` answering as it
would; the GPU tests (tests/graders/gpu/test_faulty_gpu.py, tests/security) run the real one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from graders.results import CaseResult, CompileResult, Finding, GradeReport
from graders.run.budget import GpuBudget
from graders.sandbox.runner import SandboxOutcome
from graders.sanitizer import stage
from graders.spec import load_builtin_lab

LAB = load_builtin_lab("matmul-tiled")
NAME = stage.sanitizer_case(LAB)
CLEAN = {
    t: {"status": "ok", "target": {"verdict": "ok"}, "output_bytes": 0}
    for t in ("memcheck", "racecheck", "synccheck")
}
OOB = {
    "tool": "memcheck",
    "kind": "out_of_bounds",
    "message": "Out-of-bounds write of global memory at line 12.",
    "line": 12,
}
RACE = {
    "tool": "racecheck",
    "kind": "shared_memory_race",
    "message": "Shared-memory race between line 21 and line 23.",
    "line": 21,
}


def _outcome(
    value: dict[str, Any] | None, *, timed_out: bool = False, reason: str = "", seconds: float = 3.0
) -> SandboxOutcome:
    return SandboxOutcome(
        ok=value is not None, value=value, reason=reason, message="the child stopped",
        exit_code=0, signal=None, timed_out=timed_out, stdout="", stdout_truncated=False,
        seconds=seconds, log=["sandbox: network isolated", "child raised OSError: no FIFO"],
    )  # fmt: skip


class _Child:
    """Stands in for run_sandboxed: records the request and answers `outcome`."""

    def __init__(self, outcome: SandboxOutcome) -> None:
        self.outcome = outcome
        self.calls: list[dict[str, Any]] = []

    def __call__(self, target: str, payload: dict[str, Any], **kwargs: Any) -> SandboxOutcome:
        self.calls.append({"target": target, "payload": payload, **kwargs})
        return self.outcome


class _Health:
    """The GPU health checks asked for; each answers `answer` ("" is healthy)."""

    def __init__(self) -> None:
        self.asked = 0
        self.answer = ""

    def __call__(self) -> str:
        self.asked += 1
        return self.answer


@pytest.fixture
def health(monkeypatch: pytest.MonkeyPatch) -> _Health:
    checks = _Health()
    monkeypatch.setattr(stage, "check_gpu_health", checks)
    monkeypatch.setattr(stage, "unavailable_reason", lambda: None)
    return checks


def _case(verdict: str = "pass") -> CaseResult:
    passed = verdict == "pass"
    return CaseResult(NAME, {"M": 63}, False, passed, verdict, "", 4.0 if passed else 0.0, 4.0)


def _report(case: CaseResult) -> GradeReport:
    return GradeReport(lab=LAB.id, cases=[case], score=0.0, max_score=LAB.max_score)


SEEDS = {c.name: 1000 + i for i, c in enumerate(LAB.cases)}
COMPILED = CompileResult(ok=True, message="", cubin=b"\x7fELF", declarations={"TILE": 16})


def _run(
    monkeypatch: pytest.MonkeyPatch,
    outcome: SandboxOutcome,
    *,
    lab: Any = LAB,
    budget: GpuBudget | None = None,
    case: CaseResult | None = None,
) -> tuple[str, CaseResult, GradeReport, _Child, GpuBudget]:
    child = _Child(outcome)
    monkeypatch.setattr(stage, "run_sandboxed", child)
    case = case or _case()
    report = _report(case)
    budget = budget or GpuBudget(60.0)
    note = stage.run_sanitizer(lab, COMPILED, SEEDS, report, budget)
    return note, case, report, child, budget


def test_the_job_is_the_sanitizers_case_with_the_grading_seed_and_lock(
    monkeypatch: pytest.MonkeyPatch, health: _Health
) -> None:
    value = {"findings": [], "tools": CLEAN, "seconds": 1.25}
    note, case, report, child, budget = _run(monkeypatch, _outcome(value))
    (call,) = child.calls
    assert call["target"] == stage.TARGET and call["gpu"] is True and call["pool"] == "sanitizer"
    job = call["payload"]["job"]
    assert job["case"] == NAME and job["seed"] == SEEDS[NAME]
    assert job["lab_folder"] == str(LAB.folder)
    assert job["declarations"] == {"TILE": 16} and job["cubin_b64"] == "f0VMRg=="
    assert job["timeout_s"] == 2 * LAB.limits.case_seconds
    # The lock: each tool's program takes the one its environment names (a GPU child's, as
    # graders.sandbox.isolation sets it); neither the job nor the child's request names another.
    assert "lock_dir" not in job and set(call["payload"]) == {"job", "timeout_s"}
    own = stage.tool_timeout(LAB)
    assert own == 3 * LAB.limits.case_seconds + 15
    assert call["payload"]["timeout_s"] == own
    limits = call["limits"]
    assert limits.wall_seconds == own + 60 and limits.cpu_seconds == int(own) * 8 + 120
    assert limits.memory_mb == max(LAB.limits.memory_mb, 4096) + 4096
    assert limits.max_processes == 512 and limits.max_open_files == 256
    # The child's own seconds (its lock waits left out) are what the budget pays.
    assert budget.spent == pytest.approx(1.25)
    assert case.passed and note == "memcheck: ok, racecheck: ok, synccheck: ok"
    assert health.asked == 0 and report.error == ""


def test_the_tools_get_what_is_left_of_the_budget_and_its_outcome_names_it(
    monkeypatch: pytest.MonkeyPatch, health: _Health
) -> None:
    budget = GpuBudget(60.0)
    budget.spend(50.0)
    tools = {**CLEAN, "memcheck": {"status": "timeout", "target": {}}}
    value = {"findings": [], "tools": tools, "seconds": 10.0}
    note, case, report, child, _ = _run(monkeypatch, _outcome(value), budget=budget)
    assert child.calls[0]["payload"]["timeout_s"] == 10.0  # not the tools' own 45 s
    assert not case.passed and case.verdict == "timeout" and case.message == budget.message()
    assert report.budget_spent and health.asked == 1


def test_a_hang_under_the_tools_within_their_own_time_is_the_kernels(
    monkeypatch: pytest.MonkeyPatch, health: _Health
) -> None:
    tools = {**CLEAN, "racecheck": {"status": "timeout", "target": {}}}
    value = {"findings": [], "tools": tools, "seconds": 45.0}
    _, case, report, _, _ = _run(monkeypatch, _outcome(value))
    assert case.verdict == "timeout" and "did not finish within 45 s" in case.message
    assert not report.budget_spent and health.asked == 1


def test_a_child_stopped_at_the_tools_time_limit(
    monkeypatch: pytest.MonkeyPatch, health: _Health
) -> None:
    note, case, report, _, budget = _run(monkeypatch, _outcome(None, timed_out=True))
    assert note == "the sanitizer's child was stopped at its time limit"
    assert case.verdict == "timeout" and not case.passed
    assert case.message == "Under compute-sanitizer the kernel did not finish in 45 s."
    assert budget.spent == pytest.approx(3.0)  # the child's wall time, as it gave no answer
    assert health.asked == 1 and not report.budget_spent
    assert report.stdout == "\n[grader] GPU health after the sanitizer's run was stopped: ok"


def test_a_child_stopped_when_the_budget_ran_out(
    monkeypatch: pytest.MonkeyPatch, health: _Health
) -> None:
    budget = GpuBudget(60.0)
    budget.spend(58.0)
    note, case, report, _, _ = _run(monkeypatch, _outcome(None, timed_out=True), budget=budget)
    assert note == "the sanitizer's child was stopped when the submission's GPU time ran out"
    assert case.verdict == "timeout" and case.message == budget.message()
    assert report.budget_spent and health.asked == 1
    assert report.stdout == "\n[grader] GPU health after the sanitizer's run was stopped: ok"


def test_a_child_that_failed_on_our_side_changes_nothing(
    monkeypatch: pytest.MonkeyPatch, health: _Health, caplog: pytest.LogCaptureFixture
) -> None:
    outcome = _outcome(None, reason="internal")
    with caplog.at_level("WARNING", logger=stage.log.name):
        note, case, report, _, _ = _run(monkeypatch, outcome)
    assert note == "the sanitizer could not finish (the child stopped)"
    assert case.passed and case.verdict == "pass" and health.asked == 0 and report.error == ""
    # The child's log goes to the worker's log, whole, for the staff.
    assert caplog.messages == [
        "sanitizer child for lab matmul-tiled: sandbox: network isolated\n"
        "child raised OSError: no FIFO"
    ]


def test_an_unhealthy_gpu_after_a_hang_is_the_graders_error(
    monkeypatch: pytest.MonkeyPatch, health: _Health
) -> None:
    health.answer = "the GPU did not answer"
    tools = {**CLEAN, "memcheck": {"status": "timeout", "target": {}}}
    _, case, report, _, _ = _run(monkeypatch, _outcome({"findings": [], "tools": tools}))
    assert report.error == "gpu_unhealthy"
    assert "GPU health after the kernel hung or crashed under the sanitizer: the GPU did not" in (
        report.stdout
    )


def test_a_crash_under_the_tools_fails_the_case_and_asks_after_the_gpu(
    monkeypatch: pytest.MonkeyPatch, health: _Health
) -> None:
    tools = {**CLEAN, "synccheck": {"status": "crashed", "target": {}}}
    monkeypatch.setattr(stage, "run_sandboxed", _Child(_outcome({"findings": [], "tools": tools})))
    case = _case()
    report = _report(case)
    report.stdout = "what the kernel printed"
    stage.run_sanitizer(LAB, COMPILED, SEEDS, report, GpuBudget(60.0))
    assert case.verdict == "kernel_error" and health.asked == 1
    assert report.stdout == (
        "what the kernel printed\n[grader] GPU health after the kernel hung or crashed under "
        "the sanitizer: ok"
    )


def test_a_child_that_says_nothing_more_than_it_ran(
    monkeypatch: pytest.MonkeyPatch, health: _Health
) -> None:
    note, case, report, _, _ = _run(monkeypatch, _outcome({"seconds": 1.0}))
    assert note == "" and case.passed and report.findings == [] and health.asked == 0


def test_a_report_without_the_sanitizers_case_runs_nothing(
    monkeypatch: pytest.MonkeyPatch, health: _Health
) -> None:
    child = _Child(_outcome({"findings": [], "tools": CLEAN}))
    monkeypatch.setattr(stage, "run_sandboxed", child)
    other = CaseResult("square-1", {"M": 1}, False, True, "pass", "", 4.0, 4.0)
    note = stage.run_sanitizer(LAB, COMPILED, SEEDS, _report(other), GpuBudget(60.0))
    assert note == f"skipped: case {NAME} already ended with nothing" and child.calls == []


def test_findings_are_kept_and_a_memory_error_fails_the_case(
    monkeypatch: pytest.MonkeyPatch, health: _Health
) -> None:
    value = {"findings": [OOB, RACE], "tools": CLEAN, "seconds": 2.0}
    child = _Child(_outcome(value))
    monkeypatch.setattr(stage, "run_sandboxed", child)
    case = _case()
    report = _report(case)
    static = Finding("static", "divergent_barrier", "A barrier in a branch at line 9.", 9)
    report.findings = [static]  # the compile stage's, before the sanitizer's
    stage.run_sanitizer(LAB, COMPILED, SEEDS, report, GpuBudget(60.0))
    assert [f.kind for f in report.findings] == [
        "divergent_barrier", "out_of_bounds", "shared_memory_race"
    ]  # fmt: skip
    assert case.verdict == "memory_error" and "line 12" in case.message
    assert report.sanitizer_penalty == 0 and health.asked == 0


def test_a_priced_race_costs_the_labs_points_and_leaves_the_case(
    monkeypatch: pytest.MonkeyPatch, health: _Health
) -> None:
    priced = dataclasses.replace(LAB, sanitizer_hazard_points=4.0)
    value = {"findings": [RACE], "tools": CLEAN, "seconds": 2.0}
    _, case, report, _, _ = _run(monkeypatch, _outcome(value), lab=priced)
    assert case.passed and report.sanitizer_penalty == 4.0


def test_a_note_from_the_child_is_passed_on(
    monkeypatch: pytest.MonkeyPatch, health: _Health
) -> None:
    value = {"findings": [], "tools": {}, "note": "compute-sanitizer is not installed"}
    note, case, _, _, _ = _run(monkeypatch, _outcome(value))
    assert note == "compute-sanitizer is not installed" and case.passed


def test_a_budget_spent_before_the_sanitizer_fails_its_case_unrun(
    monkeypatch: pytest.MonkeyPatch, health: _Health
) -> None:
    budget = GpuBudget(60.0)
    budget.spend(60.0)
    note, case, report, child, _ = _run(monkeypatch, _outcome(None), budget=budget)
    assert (
        child.calls == [] and note == "skipped: the submission's GPU time was spent; its case fails"
    )
    assert case.verdict == "timeout" and case.message == budget.message() and report.budget_spent


def test_no_tools_on_this_worker_or_no_case_to_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(stage, "unavailable_reason", lambda: "compute-sanitizer is not installed")
    assert stage.skip_reason(LAB, _case()) == "compute-sanitizer is not installed"
    monkeypatch.setattr(stage, "unavailable_reason", lambda: None)
    assert stage.skip_reason(LAB, _case()) == ""
    assert stage.skip_reason(LAB, None) == f"skipped: case {NAME} already ended with nothing"
    assert stage.skip_reason(LAB, _case("timeout")) == (
        f"skipped: case {NAME} already ended with timeout"
    )


def test_a_lab_without_a_sanitizer_case_uses_its_smallest_case() -> None:
    unnamed = dataclasses.replace(LAB, sanitizer_case="")
    smallest = min(LAB.cases, key=lambda c: sum(c.sizes.values()))
    assert smallest.name == "square-1" and stage.sanitizer_case(unnamed) == "square-1"
    assert stage.sanitizer_case(LAB) == "rect-63x65x70"


def test_the_note_says_where_each_programs_time_went_and_when_the_child_ended(
    monkeypatch: pytest.MonkeyPatch, health: _Health
) -> None:
    marks = {"verdict": "ok", "load_s": 0.012, "wait_s": 0.5, "held_s": 0.25}
    tools = {**CLEAN, "racecheck": {**CLEAN["racecheck"], "target": marks}}
    outcome = _outcome({"findings": [], "tools": tools})
    outcome.log.append("exited: 0.004 s after its answer")
    note, case, _, _, _ = _run(monkeypatch, outcome)
    assert case.passed
    assert note == (
        "memcheck: ok, racecheck: ok (loading 0.012 s, waiting for the lock 0.500 s, holding "
        "it 0.250 s), synccheck: ok, exited: 0.004 s after its answer"
    )
