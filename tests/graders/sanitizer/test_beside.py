"""The sanitizer started beside the run stage (graders.sanitizer.stage.Beside), without a GPU.

What runs the tools (`run_tools`: a sandboxed child with compute-sanitizer) is replaced by a
stand-in that records its calls and answers as the child would; everything else is real: which
verdict of the sanitizer's case starts the tools, that they run once, and that their ruling
lands on the case only when the run stage is over.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from graders.results import CaseResult, CompileResult, GradeReport
from graders.run.budget import GpuBudget
from graders.sandbox.runner import SandboxOutcome
from graders.sanitizer import child, stage
from graders.spec import load_builtin_lab

LAB = load_builtin_lab("matmul-tiled")
NAME = stage.sanitizer_case(LAB)
RACE = {
    "tool": "racecheck",
    "kind": "shared_memory_race",
    "message": "Shared-memory race between line 21 and line 23.",
    "line": 21,
}
CLEAN = {t: {"status": "ok", "target": {"verdict": "ok"}} for t in ("memcheck", "racecheck")}


def _outcome(findings: list[dict[str, object]]) -> SandboxOutcome:
    value = {"findings": findings, "tools": CLEAN, "seconds": 0.4}
    return SandboxOutcome(True, value, "", "", 0, None, False, "", False, 0.5)


class _Tools:
    """Stands in for run_tools: counts its calls; `gate` holds it until the test lets go."""

    def __init__(self, findings: list[dict[str, object]]) -> None:
        self.calls = 0
        self.args: list[tuple[object, ...]] = []
        self.findings = findings
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, lab, compiled, seeds, budget):  # type: ignore[no-untyped-def]
        self.calls += 1
        self.args.append((lab, compiled, seeds, budget))
        self.gate.wait(10)
        return stage.ToolsRun(_outcome(self.findings), timeout=45.0, by_budget=False)


@pytest.fixture
def tools(monkeypatch: pytest.MonkeyPatch) -> _Tools:
    fake = _Tools([RACE])
    monkeypatch.setattr(stage, "run_tools", fake)
    monkeypatch.setattr(stage, "unavailable_reason", lambda: None)
    return fake


def _case(name: str = NAME, verdict: str = "pass") -> CaseResult:
    passed = verdict == "pass"
    return CaseResult(name, {"M": 63}, False, passed, verdict, "", 4.0 if passed else 0.0, 4.0)


SEEDS = {c.name: 1 for c in LAB.cases}
COMPILED = CompileResult(ok=True, message="", cubin=b"\0")


def _beside(budget: GpuBudget | None = None) -> stage.Beside:
    return stage.Beside(LAB, COMPILED, SEEDS, budget or GpuBudget(60.0))


def _report(case: CaseResult) -> GradeReport:
    return GradeReport(lab=LAB.id, cases=[case], score=0.0, max_score=LAB.max_score)


@pytest.mark.parametrize("verdict", ["pass", "wrong_answer", "unwritten_output"])
def test_a_case_that_ran_to_a_verdict_starts_the_tools_at_once(tools: _Tools, verdict: str) -> None:
    budget = GpuBudget(60.0)
    beside = stage.Beside(LAB, COMPILED, SEEDS, budget)
    beside.on_case(_case(verdict=verdict))
    assert beside.started
    beside.finish(_report(_case(verdict=verdict)))
    assert tools.calls == 1
    ((lab, compiled, seeds, spent),) = tools.args
    assert lab is LAB and compiled is COMPILED and seeds is SEEDS and spent is budget


@pytest.mark.parametrize("verdict", sorted(stage.ENDED))
def test_a_case_that_hung_or_crashed_starts_nothing(tools: _Tools, verdict: str) -> None:
    beside = _beside()
    beside.on_case(_case(verdict=verdict))
    assert not beside.started
    note = beside.finish(_report(_case(verdict=verdict)))
    assert tools.calls == 0 and "already ended" in note


def test_another_case_or_a_spent_budget_starts_nothing(tools: _Tools) -> None:
    beside = _beside()
    beside.on_case(_case(name="square-1"))
    assert not beside.started and beside.tools_seconds == 0.0
    spent = GpuBudget(1.0)
    spent.spend(1.0)
    broke = _beside(spent)
    broke.on_case(_case())
    assert not broke.started and tools.calls == 0


def test_the_ruling_lands_on_the_case_only_at_finish_and_the_tools_run_once(
    tools: _Tools,
) -> None:
    tools.gate.clear()  # the tools are still running while the cases go on
    beside = _beside()
    beside.on_case(_case())
    beside.on_case(_case())  # a second record of the same case starts nothing more
    assert beside.running()
    final = _case()
    report = _report(final)
    assert final.passed  # nothing applied while the tools run
    tools.gate.set()
    note = beside.finish(report)
    assert tools.calls == 1
    assert not final.passed and final.verdict == "data_race" and "line 21" in final.message
    assert "racecheck: ok" in note and report.findings[0].kind == "shared_memory_race"


def test_tools_that_did_not_start_beside_run_when_the_stage_ends(tools: _Tools) -> None:
    # The case's first verdict was an out-of-memory beside other gradings (no tools); run
    # alone, it passed: the tools run once the stage is over, as they did before.
    beside = _beside()
    beside.on_case(_case(verdict="launch_error"))
    assert not beside.started
    final = _case()
    beside.finish(_report(final))
    assert tools.calls == 1 and final.verdict == "data_race"
    assert tools.args[0][1] is COMPILED and tools.args[0][2] is SEEDS


def test_a_failed_grading_waits_for_the_tools_and_applies_nothing(tools: _Tools) -> None:
    assert _beside().abandon() == ""  # nothing started, nothing to say
    tools.gate.clear()
    beside = _beside()
    beside.on_case(_case())
    final = _case()
    threading.Timer(0.2, tools.gate.set).start()
    assert beside.abandon() == "not applied: the grading failed before its ruling"
    assert not beside.running() and final.passed and tools.calls == 1


def test_an_error_in_the_tools_thread_reaches_the_grading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []

    def broken(*_: object) -> stage.ToolsRun:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the sandbox could not start")
        return stage.ToolsRun(_outcome([]), timeout=45.0, by_budget=False)

    monkeypatch.setattr(stage, "run_tools", broken)
    monkeypatch.setattr(stage, "unavailable_reason", lambda: None)
    beside = _beside()
    beside.on_case(_case())
    with pytest.raises(RuntimeError, match="could not start"):
        beside.finish(_report(_case()))
    assert calls == [1]  # raised where it happened, not run again quietly


def test_a_worker_without_the_tools_starts_nothing_beside(
    tools: _Tools, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stage, "unavailable_reason", lambda: "compute-sanitizer is not installed")
    beside = _beside()
    beside.on_case(_case())
    assert not beside.started
    assert beside.finish(_report(_case())) == "compute-sanitizer is not installed"
    assert tools.calls == 0


# --- the tools' clock (graders.sanitizer.child._collect), with real stand-in programs --------


def _program(folder: Path, name: str, before_held: float, after_held: float) -> child._Tool:
    """A stand-in for a tool and its program: waits `before_held` (for the GPU's lock), says
    it holds it, then works `after_held` seconds and ends."""
    held = folder / f"held-{name}"
    code = (
        "import pathlib, sys, time; time.sleep(float(sys.argv[1])); "
        "pathlib.Path(sys.argv[2]).touch(); time.sleep(float(sys.argv[3])); print('done')"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(before_held), str(held), str(after_held)],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    return child._Tool(name, proc, folder)


def test_the_tools_clock_starts_once_every_program_holds_the_lock(tmp_path: Path) -> None:
    # 1.2 s in all, but 0.2 s of it after the lock: within a 0.6 s limit.
    tools = [_program(tmp_path, "memcheck", 1.0, 0.2), _program(tmp_path, "racecheck", 0.1, 0.1)]
    waited = child._collect(tools, 0.6)
    assert [t.status for t in tools] == ["running", "running"]
    assert waited >= 0.9  # the slower program held the lock after 1.0 s
    assert all(t.proc.returncode == 0 for t in tools)


def test_a_program_past_its_limit_after_the_lock_is_stopped(tmp_path: Path) -> None:
    tools = [_program(tmp_path, "memcheck", 0.1, 30.0)]
    child._collect(tools, 0.6)
    assert tools[0].status == "timeout" and tools[0].proc.returncode != 0


def test_the_tools_time_beside_the_cases_is_kept_for_the_page(tools: _Tools) -> None:
    tools.gate.clear()
    began = time.monotonic()
    beside = _beside()
    beside.on_case(_case())
    threading.Timer(0.3, tools.gate.set).start()
    beside.finish(_report(_case()))
    # The tools' own run (held 0.3 s), not what was left of it, and no more than all of it.
    assert 0.25 <= beside.tools_seconds <= time.monotonic() - began
