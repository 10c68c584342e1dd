"""The run stage's parent side: hand the cases to a (prestarted) child, follow its progress, and
start a fresh child for the cases left after one that crashed, hung or was killed.

The parent never creates a CUDA context: everything that touches the GPU runs in a child, so a
kernel that crashes or hangs takes down only that child. After a child crashes or is killed the
GPU's health is checked. Whatever a submission does ends as verdicts with sentences: a child
killed in a case gives that case a verdict, and the remaining cases run in a fresh child.

Cases that ran out of GPU memory while other gradings shared the GPU run again alone (a fresh
child that holds the GPU's lock alone for its cases) before anything is ruled: only an
out-of-memory alone is the student's. The timed section's result comes as a progress record
(graders.run.child), so a hidden case that crashes the child after it cannot lose it.
"""

from __future__ import annotations

import base64
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from graders.gpu import check_gpu_health, lock_dir
from graders.results import CaseResult, CompileResult, GradeReport, TimingStats
from graders.run.budget import GpuBudget
from graders.run.child import CASE_SLACK_S
from graders.run.harness import GRADER_BUGS, as_printing_hang, hang_message
from graders.run.kernel_cache import ensure_built
from graders.run.references import needed_references, reference_payloads
from graders.run.timed import ATTEMPTS, PAUSE_S, section_limit
from graders.sandbox.limits import SandboxLimits
from graders.sandbox.runner import RAISED, SandboxOutcome, run_sandboxed
from graders.sandbox.supervise import EXITED, READY
from graders.spec import LabSpec
from graders.text import visible_text

log = logging.getLogger(__name__)

TARGET = "graders.run.child:run_in_child"
# Fresh children a grading may start after one stops on a crash or a hang.
MAX_CHILDREN = 3
CHILD_STARTUP_S = 60.0
# A child's wall clock may run this far past what is left of the submission's GPU time (its
# start and its answer), before it is stopped for the budget.
BUDGET_SLACK_S = 5.0
# A kernel that printed more than this much before it was killed is told its output was why.
FLOOD_BYTES = 1 << 20

CasesCallback = Callable[[list[CaseResult]], None]


def case_from_dict(d: dict[str, Any]) -> CaseResult:
    timing = d.get("timing")
    refs = d.get("reference_timings") or {}
    fields = {k: v for k, v in d.items() if k not in ("timing", "reference_timings")}
    return CaseResult(
        **fields,
        timing=TimingStats(**timing) if timing else None,
        reference_timings={k: TimingStats(**v) for k, v in refs.items()},
    )


def case_order(lab: LabSpec) -> list[str]:
    """Visible cases, then hidden ones (the child times the timed case between them). The
    sanitizer's case first of its group: the first launch a submission sees is the same in the
    normal run and under compute-sanitizer (same case, same seed), so it cannot tell them apart.
    """
    names = [c.name for c in lab.cases]
    if lab.sanitizer_case in names:
        names.remove(lab.sanitizer_case)
        names.insert(0, lab.sanitizer_case)
    hidden = {c.name for c in lab.cases if c.hidden}
    return [n for n in names if n not in hidden] + [n for n in names if n in hidden]


def timing_seconds(lab: LabSpec, n_refs: int) -> float:
    """The longest the timed section may take, every attempt and the pause between them."""
    if lab.timing is None:
        return 0.0
    return ATTEMPTS * section_limit(lab, n_refs) + (ATTEMPTS - 1) * PAUSE_S


def wall_limit(lab: LabSpec, n_cases: int, n_refs: int, timing: bool) -> float:
    spent = timing_seconds(lab, n_refs) if timing else 0.0
    return CHILD_STARTUP_S + n_cases * (lab.limits.case_seconds + CASE_SLACK_S) + spent + 30


def _limits(lab: LabSpec, wall: float) -> SandboxLimits:
    return SandboxLimits(
        wall_seconds=wall,
        cpu_seconds=int(wall * 4) + 30,  # the host thread spins while a kernel runs
        memory_mb=lab.limits.memory_mb + 2048,
        max_open_files=256,
    )


def grader_bug(outcome: SandboxOutcome) -> str:
    """The child's own exception ("TypeError: ..."), where it ended with one of GRADER_BUGS;
    "" otherwise (it answered, was killed, or raised a CUDA error)."""
    if outcome.reason != "internal":
        return ""
    for line in outcome.log:
        if line.startswith(RAISED):
            detail = line.removeprefix(RAISED)
            return detail if detail.split(":", 1)[0] in GRADER_BUGS else ""
    return ""


def killed_message(outcome: SandboxOutcome, lab: LabSpec) -> tuple[str, str]:
    """(verdict, sentence) for the case a child was running when it was stopped."""
    if outcome.reason == "printing":
        return "output_limit", (
            f"{outcome.message} The kernel's printf output was too much to go on: remove the "
            "printf calls, or print from one thread and a few values only."
        )
    if outcome.timed_out:
        limit = lab.limits.case_seconds
        if outcome.stdout_total > FLOOD_BYTES:
            return "timeout", (
                f"Stopped after {limit:g} s: the kernel printed {outcome.stdout_total >> 20} MiB "
                "of output and writing it out did not finish within the case's limit (a printf "
                "with a huge field width, or from many threads, does this). Print far less."
            )
        return "timeout", hang_message(limit, printed=outcome.stdout_total > 0)
    if outcome.reason == "resource_limit":
        return "kernel_error", f"The grading process was stopped: {outcome.message}"
    return "kernel_error", (
        "The grading process stopped while running this case (the kernel crashed it, or "
        "corrupted memory the grader needed); this case is counted as failed."
    )


@dataclass
class _Follow:
    """What the parent learns from a child's progress records as they come."""

    order: list[str]
    results: dict[str, CaseResult]
    on_cases: CasesCallback | None
    # Called with each case's verdict as it comes (the sanitizer starts beside the rest).
    on_case: Callable[[CaseResult], None] | None = None
    running: str | None = None
    announced: bool = False
    done: dict[str, CaseResult] = field(default_factory=dict)
    timed: dict[str, Any] | None = None  # the timed section's result, as soon as it is known
    waited: float = 0.0  # seconds the child waited for the GPU's lock
    _wait_began: float | None = None

    def __call__(self, record: dict[str, Any]) -> None:
        if record.get("lock") == "wait":
            self._wait_began = time.monotonic()
        elif record.get("lock") == "held" and self._wait_began is not None:
            self.waited += time.monotonic() - self._wait_began
            self._wait_began = None
        if "start" in record:
            self.running = str(record["start"])
        elif "done" in record:
            case = case_from_dict(record["done"])
            self.done[case.name] = case
            self.running = None
            if self.on_case is not None:
                self.on_case(case)
        elif "timed" in record:
            self.timed = dict(record["timed"])
            self.running = None
        elif record.get("phase") == "timing":
            self.running = "timing"
            if self.on_cases is not None and not self.announced:
                self.announced = True
                merged = {**self.results, **self.done}
                self.on_cases([merged[n] for n in self.order if n in merged])


def _payload(
    lab: LabSpec,
    compiled: CompileResult,
    refs: list[dict[str, Any]],
    names: list[str],
    seeds: dict[str, int],
    *,
    timing: bool,
    nonce: int,
    cached: dict[str, dict[str, Any]],
    alone: bool = False,
) -> dict[str, Any]:
    return {
        "alone": alone,
        "lab_folder": str(lab.folder),
        "submission": {
            "cubin_b64": base64.b64encode(compiled.cubin or b"").decode("ascii"),
            "declarations": compiled.declarations,
        },
        "references": refs,
        "cases": names,
        "seeds": {n: seeds[n] for n in names},
        "lock_dir": str(lock_dir()),
        "timing": timing,
        "nonce": nonce,
        "cached_references": cached,
    }


def run_cases(
    lab: LabSpec,
    compiled: CompileResult,
    seeds: dict[str, int],
    report: GradeReport,
    *,
    timing: bool = True,
    cached_references: dict[str, dict[str, Any]] | None = None,
    on_cases: CasesCallback | None = None,
    budget: GpuBudget | None = None,
    alone: bool = False,
    on_case: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Every case (and the timed section), in children; see the module docstring."""
    budget = budget or GpuBudget(lab.limits.gpu_seconds)
    ensure_built()
    order = [c for c in case_order(lab)]
    timing_wanted = timing and lab.timing is not None
    refs = reference_payloads(lab, compiled.arch or None, needed_references(lab, timing_wanted))
    nonce = secrets.randbits(62)  # never leaves the worker: timed inputs cannot be predicted
    results: dict[str, CaseResult] = {}
    remaining = list(order)
    children = 0
    while remaining and children < MAX_CHILDREN + 1:
        if budget.spent_out:
            for name in remaining:
                results[name] = CaseResult.unjudged(lab.case(name), seeds[name], budget.not_run())
            report.budget_spent = True
            break
        children += 1
        follow = _Follow(order, results, on_cases, on_case)
        own = wall_limit(lab, len(remaining), len(refs), timing_wanted)
        wall = min(own, budget.remaining() + BUDGET_SLACK_S)
        payload = _payload(
            lab,
            compiled,
            refs,
            remaining,
            seeds,
            timing=timing_wanted,
            nonce=nonce,
            cached=cached_references or {},
            alone=alone,
        )
        outcome = run_sandboxed(
            TARGET, payload, limits=_limits(lab, wall), gpu=True, pool="run", on_progress=follow
        )
        budget.spend(outcome.seconds - follow.waited)
        spent_here = outcome.timed_out and not outcome.stopped_step and wall < own
        # The kernel's own bytes, made fit to show, before the grader's notes go after them.
        report.stdout += visible_text(outcome.stdout)
        if outcome.stdout_truncated:
            kept = len(outcome.stdout.encode())
            report.stdout += f"\n[grader] output past the first {kept} bytes was dropped."
        stopped = _take_outcome(
            lab, outcome, follow, results, report, seeds, budget.message() if spent_here else ""
        )
        if spent_here:
            report.budget_spent = True
            for name in remaining:
                if name not in results:
                    results[name] = CaseResult.unjudged(
                        lab.case(name), seeds[name], budget.not_run()
                    )
            break
        oom = (outcome.value or {}).get("out_of_memory") or [] if outcome.ok else []
        if oom and not alone:
            # Out of memory beside other gradings: run those cases again alone before any
            # ruling (only an out-of-memory alone is the student's).
            log.info("lab %s: out of memory in %s beside other gradings; again alone", lab.id, oom)
            report.stdout += "\n[grader] the GPU ran out of memory beside other gradings; the "
            report.stdout += "cases that needed it ran again with the GPU to themselves."
            for name in oom:
                results.pop(name, None)
            alone = True
            remaining = [name for name in order if name not in results]
            continue
        if stopped in ("timeout", "kernel_error"):
            # A hung kernel was abandoned when the child exited, or a crashed one left its
            # context dead: either way, is the GPU still fine for the next submission? (A
            # child stopped for printing is not asked about: what it did was print.)
            health = check_gpu_health(killed_pid=outcome.pid or None)
            report.stdout += f"\n[grader] GPU health after the kernel stopped: {health or 'ok'}"
            if health:
                report.error = "gpu_unhealthy"
                break
        if report.error:
            break
        remaining = [name for name in remaining if name not in results]
        if not stopped:
            break
    out = []
    for case in lab.cases:
        if case.name in results:
            out.append(results[case.name])
        else:
            why = (
                "Not run: the grader could not finish this grading (not your fault)."
                if report.error == "internal"
                else "Not run: earlier cases stopped the kernel too often; fix those first."
            )
            out.append(CaseResult.unjudged(case, seeds[case.name], why))
    return out


def _take_outcome(
    lab: LabSpec,
    outcome: SandboxOutcome,
    follow: _Follow,
    results: dict[str, CaseResult],
    report: GradeReport,
    seeds: dict[str, int],
    budget_message: str = "",
) -> str:
    """Fold one child's outcome into `results`; returns why it stopped early ("" if it did not).
    `budget_message`: the child was stopped because the submission's GPU time ran out."""
    if outcome.ok and outcome.value is not None:
        value = outcome.value
        for d in value["cases"]:
            if d["verdict"] != "not_run":
                results[d["name"]] = case_from_dict(d)
                if d["verdict"] == "timeout" and outcome.stdout_total:
                    results[d["name"]].message = as_printing_hang(d["message"])
        if value.get("gpu"):
            from graders.results import GpuInfo

            report.gpu = GpuInfo(**value["gpu"])
        for name, stats in (value.get("measured_references") or {}).items():
            report.measured_references[name] = TimingStats(**stats)
        if value.get("contended"):
            report.timing_contended = str(value["contended"])
        notes = [line for line in outcome.log if line.startswith((READY, EXITED))]
        notes += value.get("log", [])
        log.info("run child for lab %s: %s", lab.id, "\n".join(notes)[-4000:])
        if value.get("lab_fault"):
            # The lab's own oracle.py failed: the grader's failure, never a verdict on the
            # student; the staff read which line in the summary and the worker's log.
            log.error("lab %s: its Python oracle failed: %s", lab.id, value["lab_fault"])
            report.error = "internal"
            report.summary = (
                "The grader could not finish: this lab's own Python oracle failed (not your "
                f"fault; the course staff must fix the lab). {value['lab_fault']}"
            )
            return ""
        return str(value.get("stopped", ""))
    log.warning("run child for lab %s stopped: %s", lab.id, "\n".join(outcome.log)[-8000:])
    results.update(follow.done)
    _keep_timed(lab, follow, results, report)
    running = follow.running
    if running == "timing" and lab.timing is not None:
        running = lab.timing.case
    if running is None:
        if outcome.reason == "internal" or outcome.reason == "bad_result":
            # Nothing of the student's was running: the grader itself failed.
            report.error = "internal"
            report.summary = f"The grader failed (not your fault): {outcome.message}"
            return ""
        running = next((n for n in follow.order if n not in results), None)
        if running is None:
            return ""
    bug = grader_bug(outcome)
    if bug and not budget_message:
        # The child answered with an exception of the grader's own code (a TypeError, say),
        # not a CUDA error a kernel can cause: the grader failed, whatever case was running.
        log.error("lab %s: the run child's grader code failed in %s: %s", lab.id, running, bug)
        report.error = "internal"
        report.summary = f"The grader failed (not your fault): {outcome.message}"
        return ""
    verdict, message = killed_message(outcome, lab)
    if budget_message:
        verdict, message = "timeout", budget_message
    elif follow.running == "timing" and outcome.stopped_step.startswith("timing"):
        budget_s = lab.timing.budget_seconds if lab.timing else 0.0
        verdict, message = (
            "timeout",
            (
                "The timed launches did not finish within the timed section's budget (about "
                f"{budget_s:g} s for each kernel timed; a correct kernel's launches fit in it many "
                "times over): a kernel that is fast only on its first launch, or prints in every "
                "launch, does this."
            ),
        )
    results[running] = CaseResult.unjudged(lab.case(running), seeds[running], message, verdict)
    return verdict


def _keep_timed(
    lab: LabSpec, follow: _Follow, results: dict[str, CaseResult], report: GradeReport
) -> None:
    """A child that died after its timed section (in a hidden case) still told its result."""
    record = follow.timed
    if not record or lab.timing is None:
        return
    from graders.results import GpuInfo

    timed = results.get(lab.timing.case)
    if timed is None:
        return
    if record.get("failure"):
        timed.passed, timed.points = False, 0.0
        timed.verdict, timed.message = record["verdict"], record["failure"]
        return
    if record.get("stats"):
        timed.timing = TimingStats(**record["stats"])
        timed.reference_timings = {
            k: TimingStats(**v) for k, v in (record.get("references") or {}).items()
        }
    if record.get("gpu"):
        report.gpu = GpuInfo(**record["gpu"])
    for name, stats in (record.get("measured_references") or {}).items():
        report.measured_references[name] = TimingStats(**stats)
    if record.get("contended"):
        report.timing_contended = str(record["contended"])
