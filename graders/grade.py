"""Grade one submission: the pipeline of stages after compiling, and the score.

`run_submission` is what a GPU worker calls after the compile stage; `grade_source` compiles
and runs, for tests, the CLI and the bench. The stages, in order:

1. the cases (graders.run.stage): correctness in a sandboxed child on the GPU, each case
   judged on the device; then, in the same child, the timed section;
2. the sanitizer (graders.sanitizer.stage) on the lab's small case, started beside the rest
   of the cases once that case has its verdict in the normal run;
3. the score (graders.scoring).

`on_phase(phase, report)` is called as the grading moves on, with the cases known so far:
"timing" once every case has its verdict (before the timed section), "sanitizer" before the
sanitizer runs. The worker records the verdicts then, so a student sees pass or fail while the
rest still runs. The engine keeps no database: reference timings kept from earlier gradings
come in as `cached_references`, and the ones measured here go out in
`report.measured_references`.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any

from graders.config import DEFAULTS, EngineSettings
from graders.gpu import gpu_key, gpu_unavailable_reason, lock_dir
from graders.results import CaseResult, CompileResult, Finding, GradeReport
from graders.run import memory
from graders.run.budget import GpuBudget
from graders.run.inputs import case_seeds
from graders.run.references import compile_reference, reference_payloads
from graders.run.stage import run_cases
from graders.sanitizer.stage import Beside
from graders.scoring import points as scoring
from graders.spec import LabSpec
from graders.text import VISIBLE_LIMIT_BYTES, visible_text
from graders.timing.peaks import floor_ms, peak_for
from graders.timing.references import speed_flag

__all__ = ["compile_reference", "grade_source", "reference_payloads", "run_submission"]

log = logging.getLogger(__name__)
PhaseCallback = Callable[[str, GradeReport], None]


def _compile(lab: LabSpec, source: str, **kwargs: Any) -> CompileResult:
    from graders.compile.compiler import compile_submission

    return compile_submission(lab, source, **kwargs)


def default_arch(fallback: str) -> str:
    from graders.compile.compiler import default_arch as detected_or

    return detected_or(fallback)


def _static_findings(compiled: CompileResult) -> list[Finding]:
    out = []
    for text in compiled.warnings:
        low = text.lower()
        kind = "divergent_barrier" if "barrier" in low or "__syncthreads" in low else "warning"
        m = re.match(r"\s*line (\d+)", text, re.IGNORECASE)
        out.append(Finding("static", kind, text, line=int(m.group(1)) if m else None))
    return out


def _announce(on_phase: PhaseCallback | None, phase: str, report: GradeReport) -> None:
    if on_phase is None:
        return
    try:
        on_phase(phase, report)
    except Exception:  # recording progress must never stop the grading
        log.exception("recording the %s phase failed", phase)


def run_submission(
    lab: LabSpec,
    source: str,
    *,
    compiled: CompileResult,
    secret: str,
    sanitizer: bool | None = None,
    timing: bool = True,
    cached_references: dict[str, dict[str, Any]] | None = None,
    on_phase: PhaseCallback | None = None,
    engine: EngineSettings = DEFAULTS,
) -> GradeReport:
    """The stages after compiling; never raises for anything the student did.

    `timing=False` skips the timed repetitions (and so performance points): for tests that
    only check correctness. The GPU stages start once the grading fits in the GPU's memory
    beside the others and its turn has come (graders.run.memory): `engine` holds the worker's
    reserve of GPU memory and its cap on gradings at once on the GPU (graders.config).
    """
    report = GradeReport(
        lab=lab.id,
        cases=[],
        score=0.0,
        max_score=lab.max_score,
        max_performance_points=float(lab.scoring.performance_points),
    )
    report.stage_seconds["compile"] = round(compiled.seconds, 3)
    report.findings = _static_findings(compiled)
    seeds = case_seeds(lab, secret)
    if not compiled.ok or not compiled.cubin:
        report.error = "compile_error"
        why = "Not run: the submission did not compile."
        report.cases = [CaseResult.unjudged(c, seeds[c.name], why) for c in lab.cases]
        report.summary = compiled.message
        return report
    reason = gpu_unavailable_reason()
    if reason:
        report.error = "no_gpu"
        report.cases = [
            CaseResult.unjudged(c, seeds[c.name], f"Not run: {reason}") for c in lab.cases
        ]
        report.summary = f"Compiled; running waits for a GPU worker. {reason}"
        return report

    with_sanitizer = bool(lab.sanitizer if sanitizer is None else sanitizer)
    need = memory.need_bytes(
        lab,
        timing=timing,
        global_bytes=int(getattr(compiled, "global_bytes", 0) or 0),
        sanitizer=with_sanitizer,
    )
    ticket = memory.Ledger(lock_dir(), gpu_key()).admit(
        need,
        reserve=memory.reserve_bytes(engine.gpu_memory_reserve_mb),
        jobs=engine.gpu_jobs,
        on_wait=log.info,
    )
    try:
        _run_stages(
            lab,
            compiled,
            seeds,
            report,
            ticket,
            timing,
            with_sanitizer,
            cached_references,
            on_phase,
        )
    finally:
        ticket.release()
    _score(lab, report)
    # Each child's output was cleaned and capped where it was read; this bounds the whole
    # (up to MAX_CHILDREN children and the grader's notes) once more.
    report.stdout = visible_text(report.stdout, limit=3 * VISIBLE_LIMIT_BYTES)
    return report


def _run_stages(
    lab: LabSpec,
    compiled: CompileResult,
    seeds: dict[str, int],
    report: GradeReport,
    ticket: memory.Ticket,
    timing: bool,
    with_sanitizer: bool,
    cached_references: dict[str, dict[str, Any]] | None,
    on_phase: PhaseCallback | None,
) -> None:
    """The cases (and the timed section), the sanitizer beside them, within the submission's
    budget."""
    if ticket.waited_s >= 1 or ticket.alone:
        log.info("lab %s: %s after %.1f s", lab.id, memory.describe(ticket), ticket.waited_s)
    began = time.monotonic()
    budget = GpuBudget(lab.limits.gpu_seconds)

    def cases_known(cases: list[CaseResult]) -> None:
        report.cases = cases
        report.stage_seconds["run"] = round(time.monotonic() - began, 3)
        _announce(on_phase, "timing", report)

    beside = Beside(lab, compiled, seeds, budget) if with_sanitizer else None
    report.cases = run_cases(
        lab,
        compiled,
        seeds,
        report,
        timing=timing,
        cached_references=cached_references,
        on_cases=cases_known,
        budget=budget,
        alone=ticket.alone,
        on_case=beside.on_case if beside is not None else None,
    )
    total = round(time.monotonic() - began, 3)
    ran = report.stage_seconds.setdefault("run", total)
    if ran != total:
        report.stage_seconds["timing"] = round(total - ran, 3)
    if beside is None:
        return
    if beside.running() or not beside.started:
        _announce(on_phase, "sanitizer", report)
    began = time.monotonic()
    note = beside.finish(report) if not report.error else beside.abandon()
    if note:
        log.info("sanitizer for lab %s: %s", lab.id, note)
    # How long the tools ran; beside the cases, only what was left of it once they were done
    # held the grading up (the "sanitizer" status lasts that long).
    tools_s = beside.tools_seconds if beside.started else time.monotonic() - began
    report.stage_seconds["sanitizer"] = round(tools_s, 3)


def physics_floor_ms(lab: LabSpec, case: CaseResult, gpu_name: str) -> float | None:
    """The least time a correct run of the timed case could take on this GPU (None where the
    GPU or the lab's work is unknown); see graders.timing.peaks."""
    peak = peak_for(gpu_name)
    if peak is None:
        return None
    launches = len(lab.launches)
    if lab.work is None:
        return floor_ms(peak, flops=0.0, nbytes=0.0, launches=launches, dtype="float32")
    flops, nbytes = lab.work.for_case(case.sizes)
    dtype = next((p.dtype for p in lab.params if p.is_output), "float32")
    return floor_ms(peak, flops=flops, nbytes=nbytes, launches=launches, dtype=dtype)


def _score(lab: LabSpec, report: GradeReport) -> None:
    report.correctness_points = scoring.correctness_points(report.cases)
    timed = next((c for c in report.cases if c.timing is not None), None)
    ref_ms = {k: v.median_ms for k, v in timed.reference_timings.items()} if timed else {}
    floor = None
    if timed and timed.timing:
        floor = physics_floor_ms(
            lab, timed, timed.timing.gpu or (report.gpu.name if report.gpu else "")
        )
    perf = scoring.performance_score(
        max_points=float(lab.scoring.performance_points),
        all_passed=all(c.passed for c in report.cases),
        time_ms=timed.timing.median_ms if timed and timed.timing else None,
        reference_ms=ref_ms,
        baseline=lab.scoring.baseline or "",
        target=lab.scoring.target or "",
        contended=bool(report.timing_contended),
        floor_ms=floor,
    )
    report.performance_points = perf.points
    report.performance_pending = perf.pending
    if perf.pending:
        report.flags.append(
            "Performance points held back: " + report.timing_contended + ". The worker times "
            "it again when the GPU is quiet; a regrade does the same."
        )
    if perf.impossible and timed and timed.timing:
        report.flags.append(
            f"The timed median, {timed.timing.median_ms:.4g} ms, is under the physics floor of "
            f"{floor:.4g} ms for {timed.timing.gpu or 'this GPU'} (the lab's bytes over the "
            "memory bandwidth, its arithmetic over the fastest unit, its launches): the timing "
            "was likely gamed. No performance points were given."
        )
    earned = report.correctness_points + perf.points
    report.score = round(max(0.0, earned - report.sanitizer_penalty), 2)
    speed = ""
    if timed and timed.timing and lab.scoring.baseline:
        base = timed.reference_timings.get(lab.scoring.baseline)
        spread = None
        if base is not None and base.ratio and base.ratio_spread is not None:
            spread = base.ratio_spread / base.ratio
        speed = scoring.speedup_phrase(
            timed.timing.median_ms, ref_ms, lab.scoring.baseline, spread=spread
        )
    summary = scoring.summary_sentence(report.cases, perf, speed)
    if perf.sentence and lab.scoring.performance_points:
        summary += " " + perf.sentence
    if report.sanitizer_penalty:
        summary += (
            f" compute-sanitizer found a race or barrier error: {report.sanitizer_penalty:g} "
            "points off, as the lab sets."
        )
    if report.budget_spent:
        summary += f" The grading stopped at the lab's GPU time of {lab.limits.gpu_seconds:g} s."
    if report.error == "gpu_unhealthy":
        summary += " The GPU was not healthy after the kernel stopped; an administrator was told."
    report.summary = summary if not report.summary else report.summary + " " + summary
    if timed and timed.timing and lab.timing is not None:
        flag = speed_flag(timed.timing.median_ms, ref_ms, lab.timing.flag_speedup)
        if flag:
            report.flags.append(flag)


def grade_source(
    lab: LabSpec,
    source: str,
    *,
    secret: str,
    sanitizer: bool | None = None,
    timing: bool = True,
    cached_references: dict[str, dict[str, Any]] | None = None,
    on_phase: PhaseCallback | None = None,
    engine: EngineSettings = DEFAULTS,
) -> GradeReport:
    """Compile for this host's GPU (else `engine.default_arch`; with line info, for the
    sanitizer), then run."""
    compiled = _compile(lab, source, line_info=True, arch=default_arch(engine.default_arch))
    return run_submission(
        lab,
        source,
        compiled=compiled,
        secret=secret,
        sanitizer=sanitizer,
        timing=timing,
        cached_references=cached_references,
        on_phase=on_phase,
        engine=engine,
    )
