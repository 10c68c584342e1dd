"""The sanitizer stage's parent side: run the tools on the sanitizer's case, fold in the ruling.

The submission's cubin carries line info (the worker compiles with -lineinfo, which leaves the
machine code as it is), so the findings name lines of the student's file. The tools run in a
(prestarted) sandboxed child with a memory limit; their time is proportional to the lab's case
limit. The stage is skipped where the normal run already ended the sanitizer's case with a hang
or a crash: that case has its verdict, and running it again under instrumentation would only
cost the GPU more time.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from graders.gpu import check_gpu_health
from graders.results import CaseResult, CompileResult, Finding, GradeReport
from graders.run.budget import GpuBudget
from graders.sandbox.limits import SandboxLimits
from graders.sandbox.process import note_cpu
from graders.sandbox.runner import SandboxOutcome, run_sandboxed
from graders.sandbox.supervise import EXITED
from graders.sanitizer import launcher, verdicts
from graders.sanitizer.tool import unavailable_reason
from graders.spec import LabSpec

log = logging.getLogger(__name__)
TARGET = "graders.sanitizer.child:run_in_child"


def tool_timeout(lab: LabSpec) -> float:
    """How long the tools get: the case's limit three times over (instrumented code is slow)."""
    return 3 * lab.limits.case_seconds + 15


def sanitizer_case(lab: LabSpec) -> str:
    return lab.sanitizer_case or min(lab.cases, key=lambda c: sum(c.sizes.values())).name


ENDED = ("timeout", "kernel_error", "launch_error", "output_limit", "not_run")


@dataclass
class ToolsRun:
    """The tools' run in their child, before its ruling is applied to a report."""

    outcome: SandboxOutcome
    timeout: float
    by_budget: bool  # the time was cut to what was left of the submission's GPU budget


def run_tools(
    lab: LabSpec, compiled: CompileResult, seeds: dict[str, int], budget: GpuBudget
) -> ToolsRun:
    """The tools on the sanitizer's case, in a (prestarted) sandboxed child; touches no report."""
    name = sanitizer_case(lab)
    own = tool_timeout(lab)
    timeout = min(own, budget.remaining())
    job = {
        "lab_folder": str(lab.folder),
        "cubin_b64": base64.b64encode(compiled.cubin or b"").decode("ascii"),
        "declarations": compiled.declarations,
        "case": name,
        "seed": seeds[name],
        "timeout_s": 2 * lab.limits.case_seconds,
    }
    limits = SandboxLimits(
        wall_seconds=timeout + 60,
        cpu_seconds=int(timeout) * 8 + 120,
        memory_mb=max(lab.limits.memory_mb, 4096) + 4096,
        max_processes=512,
        max_open_files=256,
    )
    payload = {"job": job, "timeout_s": timeout}
    launcher.ensure_built()  # once per process; the tools run the Python program without it
    outcome = run_sandboxed(TARGET, payload, limits=limits, gpu=True, pool="sanitizer")
    value = outcome.value or {}
    budget.spend(float(value.get("seconds") or outcome.seconds))
    for name, tool in (value.get("tools") or {}).items():
        note_cpu(f"sanitizer.{name}", _seconds(tool.get("cpu_s")))
    note_cpu("sanitizer.child", _seconds(value.get("self_cpu_s")))
    return ToolsRun(outcome, timeout, timeout < own)


def _seconds(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def skip_reason(lab: LabSpec, case: CaseResult | None) -> str:
    """Why the tools do not run for this verdict of the sanitizer's case ("" when they do)."""
    reason = unavailable_reason()
    if reason:
        return reason
    if case is None or case.verdict in ENDED:
        name = sanitizer_case(lab)
        return f"skipped: case {name} already ended with {case.verdict if case else 'nothing'}"
    return ""


def run_sanitizer(
    lab: LabSpec,
    compiled: CompileResult,
    seeds: dict[str, int],
    report: GradeReport,
    budget: GpuBudget,
    ran: ToolsRun | None = None,
) -> str:
    """Findings into `report`, the ruling onto its case; returns a note for the grader log.

    `ran`: the tools' run, where it was started beside the cases (`Beside`); else it runs now.
    """
    name = sanitizer_case(lab)
    case = next((c for c in report.cases if c.name == name), None)
    reason = skip_reason(lab, case)
    if reason:
        return reason
    assert case is not None
    if ran is None:
        if budget.spent_out:
            # Spending the budget before the sanitizer must not spare a kernel its checks.
            verdicts.apply(case, _budget_ruling(report, budget))
            return "skipped: the submission's GPU time was spent; its case fails"
        ran = run_tools(lab, compiled, seeds, budget)
    outcome, timeout = ran.outcome, ran.timeout
    if not outcome.ok or outcome.value is None:
        log.warning("sanitizer child for lab %s: %s", lab.id, "\n".join(outcome.log)[-4000:])
        if outcome.timed_out and ran.by_budget:
            verdicts.apply(case, _budget_ruling(report, budget))
            _check_health(report, "the sanitizer's run was stopped")
            return "the sanitizer's child was stopped when the submission's GPU time ran out"
        if outcome.timed_out:
            ruling = verdicts.Ruling(
                "timeout", f"Under compute-sanitizer the kernel did not finish in {timeout:g} s."
            )
            verdicts.apply(case, ruling)
            _check_health(report, "the sanitizer's run was stopped")
            return "the sanitizer's child was stopped at its time limit"
        return f"the sanitizer could not finish ({outcome.message or outcome.reason})"
    value = outcome.value
    found = [Finding(**f) for f in value.get("findings", [])]
    report.findings += found
    tools = value.get("tools", {})
    ruling = verdicts.rule(
        found, tools, hazard_points=lab.sanitizer_hazard_points, timeout_s=timeout
    )
    if ruling.verdict == "timeout" and ran.by_budget:
        ruling = _budget_ruling(report, budget)
    verdicts.apply(case, ruling)
    if ruling.verdict in ("timeout", "kernel_error"):
        _check_health(report, "the kernel hung or crashed under the sanitizer")
    if ruling.penalty:
        report.sanitizer_penalty = ruling.penalty
    exited = [line for line in outcome.log if line.startswith(EXITED)]
    needed = value.get("needed") or {}
    notes = [_tool_note(k, v) for k, v in tools.items()] + exited
    notes += [f"{k} runs: {why}" for k, why in needed.items() if why != "always"]
    return value.get("note", "") or ", ".join(notes)


def _tool_note(name: str, tool: dict[str, Any]) -> str:
    """One tool's line for the worker's log: how it ended, and where its program's time went
    (graders.run.marks.Marks, from graders.sanitizer.target) where it says."""
    target = tool.get("target") or {}
    note = f"{name}: {tool.get('status')}"
    if tool.get("native"):
        note += " (launcher)"
    if "held_s" in target:  # marked last: loading and waiting were marked before it
        note += (
            f" (loading {target['load_s']:.3f} s, waiting for the lock "
            f"{target['wait_s']:.3f} s, holding it {target['held_s']:.3f} s)"
        )
    return note


class Beside:
    """The tools started beside the rest of the run stage, as soon as the sanitizer's case has
    its verdict in the normal run (it is the first case a child runs: graders.run.stage), so
    the sanitizer no longer waits for the cases and the timed section to end.

    The same rules as one after the other: the tools start only for a verdict that
    `skip_reason` lets through and while GPU budget is left, each holds the GPU's lock shared
    while its program uses the GPU (graders.sanitizer.target), so a timed section never
    overlaps it, and the ruling is applied once the run stage is over (`finish`).
    """

    def __init__(
        self, lab: LabSpec, compiled: CompileResult, seeds: dict[str, int], budget: GpuBudget
    ) -> None:
        self.lab, self.compiled, self.seeds, self.budget = lab, compiled, seeds, budget
        self.name = sanitizer_case(lab)
        self._thread: threading.Thread | None = None
        self._ran: ToolsRun | None = None
        self._error: BaseException | None = None
        # Wall seconds of the tools' run beside the cases (0 until it ends).
        self.tools_seconds = 0.0

    def on_case(self, case: CaseResult) -> None:
        """A case's verdict from the normal run: the sanitizer's case starts the tools."""
        if case.name != self.name or self._thread is not None:
            return
        if skip_reason(self.lab, case) or self.budget.spent_out:
            return
        self._thread = threading.Thread(target=self._run, name="sanitizer-beside", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        began = time.monotonic()
        try:
            self._ran = run_tools(self.lab, self.compiled, self.seeds, self.budget)
        except BaseException as exc:  # re-raised in the grading's own thread by finish()
            self._error = exc
        finally:
            self.tools_seconds = time.monotonic() - began

    @property
    def started(self) -> bool:
        return self._thread is not None

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def abandon(self) -> str:
        """The grading failed on the grader's side: wait for the tools, apply nothing."""
        if self._thread is not None:
            self._thread.join()
        return "not applied: the grading failed before its ruling" if self.started else ""

    def finish(self, report: GradeReport) -> str:
        """Wait for the tools (if they started) and apply their ruling, as run_sanitizer does;
        where they did not start, they run now."""
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        return run_sanitizer(
            self.lab, self.compiled, self.seeds, report, self.budget, ran=self._ran
        )


def _budget_ruling(report: GradeReport, budget: GpuBudget) -> verdicts.Ruling:
    """The timeout that names the submission's GPU budget; the report marked as having spent it."""
    report.budget_spent = True
    return verdicts.Ruling("timeout", budget.message())


def _check_health(report: GradeReport, what: str) -> None:
    """As after a hang or crash in the normal run: is the GPU fine for the next submission?"""
    health = check_gpu_health()
    report.stdout += f"\n[grader] GPU health after {what}: {health or 'ok'}"
    if health:
        report.error = "gpu_unhealthy"
