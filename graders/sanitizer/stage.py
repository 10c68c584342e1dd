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

from graders.gpu import check_gpu_health, lock_dir
from graders.results import CompileResult, Finding, GradeReport
from graders.run.budget import GpuBudget
from graders.sandbox.limits import SandboxLimits
from graders.sandbox.runner import run_sandboxed
from graders.sanitizer import verdicts
from graders.sanitizer.tool import unavailable_reason
from graders.spec import LabSpec

log = logging.getLogger(__name__)
TARGET = "graders.sanitizer.child:run_in_child"


def tool_timeout(lab: LabSpec) -> float:
    """How long the tools get: the case's limit three times over (instrumented code is slow)."""
    return 3 * lab.limits.case_seconds + 15


def sanitizer_case(lab: LabSpec) -> str:
    return lab.sanitizer_case or min(lab.cases, key=lambda c: sum(c.sizes.values())).name


def run_sanitizer(
    lab: LabSpec,
    compiled: CompileResult,
    seeds: dict[str, int],
    report: GradeReport,
    budget: GpuBudget,
) -> str:
    """Findings into `report`, the ruling onto its case; returns a note for the grader log."""
    reason = unavailable_reason()
    if reason:
        return reason
    name = sanitizer_case(lab)
    case = next((c for c in report.cases if c.name == name), None)
    ended = ("timeout", "kernel_error", "launch_error", "output_limit", "not_run")
    if case is None or case.verdict in ended:
        return f"skipped: case {name} already ended with {case.verdict if case else 'nothing'}"
    if budget.spent_out:
        # Spending the budget before the sanitizer must not spare a kernel its checks.
        verdicts.apply(case, _budget_ruling(report, budget))
        return "skipped: the submission's GPU time was spent; its case fails"
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
    payload = {"job": job, "timeout_s": timeout, "lock_dir": str(lock_dir())}
    outcome = run_sandboxed(TARGET, payload, limits=limits, gpu=True, pool="sanitizer")
    budget.spend(float((outcome.value or {}).get("seconds") or outcome.seconds))
    by_budget = timeout < own
    if not outcome.ok or outcome.value is None:
        log.warning("sanitizer child for lab %s: %s", lab.id, "\n".join(outcome.log)[-4000:])
        if outcome.timed_out and by_budget:
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
    if ruling.verdict == "timeout" and by_budget:
        ruling = _budget_ruling(report, budget)
    verdicts.apply(case, ruling)
    if ruling.verdict in ("timeout", "kernel_error"):
        _check_health(report, "the kernel hung or crashed under the sanitizer")
    if ruling.penalty:
        report.sanitizer_penalty = ruling.penalty
    notes = [f"{k}: {v.get('status')}" for k, v in tools.items()]
    return value.get("note", "") or ", ".join(notes)


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
