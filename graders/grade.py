"""Grade one submission: the run stage in a sandboxed child on the GPU, the sanitizer, the score.

`run_submission` is what a GPU worker calls after the compile stage; `grade_source` compiles
and runs, for tests, the CLI and the bench. The parent process here never creates a CUDA
context: everything that touches the GPU runs in a child, so a kernel that crashes or hangs
takes down only that child. After a child crashes or is killed, the GPU's health is checked.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from graders import scoring
from graders.gpu import check_gpu_health, gpu_unavailable_reason, lock_dir
from graders.inputs import case_seed
from graders.results import CaseResult, CompileResult, Finding, GpuInfo, GradeReport, TimingStats
from graders.specs import CaseSpec, LabSpec

# Fresh children a grading may start after one stops on a crash or a hang.
MAX_CHILDREN = 3
CHILD_STARTUP_S = 60.0


def run_in_child(payload: dict[str, Any]) -> dict[str, Any]:
    """Sandbox target (`graders.grade:run_in_child`): the run stage for some cases."""
    from graders.run_stage import run_cases

    return run_cases(payload)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _compile(lab: LabSpec, source: str, **kwargs: Any) -> CompileResult:
    from graders.compile import compile_submission

    return compile_submission(lab, source, **kwargs)


@functools.lru_cache(maxsize=64)
def _compile_reference_cached(
    lab_folder: str, name: str, digest: str, arch: str | None, line_info: bool
) -> CompileResult:
    from graders.specs import load_lab

    lab = load_lab(lab_folder)
    ref = lab.reference(name)
    # A reference is trusted instructor code: the lab's `requires` (e.g. `__shared__`) is a rule
    # for submissions, and the naive baseline of a tiled lab rightly breaks it.
    lab = dataclasses.replace(lab, requires=[])
    return _compile(
        lab, ref.source, arch=arch, filename=ref.file or f"{name}.cu", line_info=line_info
    )


def compile_reference(lab: LabSpec, name: str, *, arch: str | None = None) -> CompileResult:
    """A reference kernel of `lab`, compiled as submissions are but without `requires`."""
    ref = lab.reference(name)
    digest = hashlib.sha256(ref.source.encode()).hexdigest()
    return _compile_reference_cached(str(lab.folder), name, digest, arch, False)


def reference_payloads(
    lab: LabSpec, arch: str | None, names: list[str] | None = None
) -> list[dict[str, Any]]:
    """Compiled references (cached per lab, file content and arch) for the run child."""
    out: list[dict[str, Any]] = []
    for ref in lab.references:
        if names is not None and ref.name not in names:
            continue
        if ref.builtin:
            out.append({"name": ref.name, "builtin": ref.builtin})
            continue
        digest = hashlib.sha256(ref.source.encode()).hexdigest()
        compiled = _compile_reference_cached(str(lab.folder), ref.name, digest, arch, False)
        if not compiled.ok or compiled.cubin is None:
            raise RuntimeError(
                f"The reference kernel {ref.path_label} of lab {lab.id} does not compile: "
                f"{compiled.message}\n{compiled.log}"
            )
        out.append(
            {
                "name": ref.name,
                "cubin_b64": _b64(compiled.cubin),
                "declarations": compiled.declarations,
            }
        )
    return out


def _needed_references(lab: LabSpec, timing: bool) -> list[str]:
    names = []
    if lab.expected_oracle.startswith("reference:"):
        names.append(lab.expected_oracle.split(":", 1)[1])
    if timing and lab.timing is not None:
        names += [r.name for r in lab.references if r.name not in names]
    return names


def _wall_limit(lab: LabSpec, n_cases: int, n_refs: int) -> float:
    timing = 0.0
    if lab.timing is not None:
        timing = (1 + n_refs) * (lab.timing.budget_seconds * 2 + lab.limits.case_seconds)
    return CHILD_STARTUP_S + n_cases * (lab.limits.case_seconds + 10) + timing


def _limits(lab: LabSpec, wall: float) -> Any:
    from graders.sandbox import SandboxLimits

    return SandboxLimits(
        wall_seconds=wall, cpu_seconds=int(wall) + 30, memory_mb=lab.limits.memory_mb + 2048
    )


def _read_progress(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """Finished cases and the case that had started but not finished, from the child's log."""
    done: list[dict[str, Any]] = []
    running = None
    if not path.exists():
        return done, running
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if "start" in record:
            running = record["start"]
        elif "done" in record:
            done.append(record["done"])
            running = None
    return done, running


def _case_from_dict(d: dict[str, Any]) -> CaseResult:
    timing = d.get("timing")
    refs = d.get("reference_timings") or {}
    fields = {k: v for k, v in d.items() if k not in ("timing", "reference_timings")}
    return CaseResult(
        **fields,
        timing=TimingStats(**timing) if timing else None,
        reference_timings={k: TimingStats(**v) for k, v in refs.items()},
    )


def _not_run(case: CaseSpec, seed: int, message: str, verdict: str = "not_run") -> CaseResult:
    return CaseResult(
        name=case.name,
        sizes=dict(case.sizes),
        hidden=case.hidden,
        passed=False,
        verdict=verdict,
        message=message,
        max_points=float(case.points),
        seed=seed,
    )


def _killed_message(outcome: Any, wall: float) -> tuple[str, str]:
    if outcome.timed_out or outcome.reason == "timeout":
        return "timeout", (
            f"Killed after {wall:.0f} s: the kernel did not finish (an endless loop, or a "
            "__syncthreads() in divergent code that some threads never reach, can cause this)."
        )
    detail = outcome.message or outcome.reason or "it stopped unexpectedly"
    return "kernel_error", f"The grading process stopped while running this case: {detail}"


def _run_stage(
    lab: LabSpec,
    compiled: CompileResult,
    seeds: dict[str, int],
    report: GradeReport,
    *,
    timing: bool = True,
) -> list[CaseResult]:
    """Run every case, starting a fresh child after one that crashed, hung or was killed."""
    from graders.sandbox import run_sandboxed

    results: dict[str, CaseResult] = {}
    remaining = [c.name for c in lab.cases]
    timing_wanted = timing and lab.timing is not None
    refs = reference_payloads(lab, compiled.arch or None, _needed_references(lab, timing_wanted))
    # The worker's pid in the name: its next start removes folders whose owner was killed.
    work = Path(tempfile.mkdtemp(prefix=f"kernelgrader-run-{os.getpid()}-"))
    try:
        for attempt in range(MAX_CHILDREN):
            if not remaining:
                break
            progress = work / f"progress-{attempt}.jsonl"
            progress.touch(mode=0o666)
            payload = {
                "lab_folder": str(lab.folder),
                "submission": {
                    "cubin_b64": _b64(compiled.cubin or b""),
                    "declarations": compiled.declarations,
                },
                "references": refs,
                "cases": remaining,
                "seeds": seeds,
                "lock_dir": str(lock_dir()),
                "progress_path": str(progress),
                "timing": timing_wanted,
            }
            wall = _wall_limit(lab, len(remaining), len(refs))
            outcome = run_sandboxed(
                "graders.grade:run_in_child", payload, limits=_limits(lab, wall), gpu=True
            )
            report.stdout += outcome.stdout
            if outcome.stdout_truncated:
                kept = len(outcome.stdout.encode())
                report.stdout += f"\n[grader] output past the first {kept} bytes was dropped."
            if outcome.ok and outcome.value is not None:
                value = outcome.value
                for d in value["cases"]:
                    if d["verdict"] != "not_run":
                        results[d["name"]] = _case_from_dict(d)
                if value.get("gpu"):
                    report.gpu = GpuInfo(**value["gpu"])
                stopped = value.get("stopped", "")
                if stopped in ("timeout", "kernel_error"):
                    # A hung kernel was abandoned when the child exited, or a crashed one left its
                    # context dead: either way, is the GPU still fine for the next submission?
                    health = check_gpu_health()
                    what = "a hung kernel" if stopped == "timeout" else "a crashed kernel"
                    report.stdout += f"\n[grader] GPU health after {what}: {health or 'ok'}"
                    if health:
                        report.error = "gpu_unhealthy"
                        break
            else:
                done, running = _read_progress(progress)
                for d in done:
                    results[d["name"]] = _case_from_dict(d)
                if outcome.reason == "internal":
                    report.stdout += "\n[grader] " + "\n".join(outcome.log)[-4000:]
                    report.error = "internal"
                    report.summary = f"The grader failed (not your fault): {outcome.message}"
                    break
                verdict, message = _killed_message(outcome, wall)
                if running:
                    case = lab.case(running)
                    results[running] = _not_run(case, seeds[running], message, verdict)
                stopped = verdict
                health = check_gpu_health()
                report.stdout += f"\n[grader] GPU health after the child stopped: {health or 'ok'}"
                if health:
                    report.error = "gpu_unhealthy"
                    break
            remaining = [name for name in remaining if name not in results]
            if not stopped:
                break
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = []
    for case in lab.cases:
        if case.name in results:
            out.append(results[case.name])
        else:
            out.append(
                _not_run(
                    case,
                    seeds[case.name],
                    "Not run: earlier cases stopped the kernel too often; fix those first.",
                )
            )
    return out


def _sanitizer_stage(
    lab: LabSpec, source: str, compiled: CompileResult, seeds: dict[str, int]
) -> tuple[list[Finding], str]:
    from graders import sanitizer
    from graders.sandbox import SandboxLimits, run_sandboxed

    reason = sanitizer.unavailable_reason()
    if reason:
        return [], reason
    case = lab.sanitizer_case or min(lab.cases, key=lambda c: sum(c.sizes.values())).name
    lined = _compile(lab, source, arch=compiled.arch or None, line_info=True)
    if not lined.ok or lined.cubin is None:
        return [], f"The sanitizer was skipped: compiling with line info failed ({lined.message})."
    job = {
        "lab_folder": str(lab.folder),
        "cubin_b64": _b64(lined.cubin),
        "declarations": lined.declarations,
        "case": case,
        "seed": seeds[case],
        "timeout_s": lab.limits.case_seconds * 3,
    }
    timeout = sanitizer.TOOL_TIMEOUT_S
    limits = SandboxLimits(
        wall_seconds=timeout + 30, cpu_seconds=int(timeout) * 4, memory_mb=None, max_processes=512
    )
    outcome = run_sandboxed(
        "graders.sanitizer:run_in_child",
        {"job": job, "timeout_s": timeout, "executable": sanitizer.executable()},
        limits=limits,
        gpu=True,
    )
    if not outcome.ok or outcome.value is None:
        return [], f"The sanitizer could not finish ({outcome.message or outcome.reason})."
    findings = [Finding(**f) for f in outcome.value["findings"]]
    return findings, str(outcome.value.get("note", ""))


def _static_findings(compiled: CompileResult) -> list[Finding]:
    import re

    out = []
    for text in compiled.warnings:
        low = text.lower()
        kind = "divergent_barrier" if "barrier" in low or "__syncthreads" in low else "warning"
        m = re.match(r"\s*line (\d+)", text, re.IGNORECASE)
        out.append(Finding("static", kind, text, line=int(m.group(1)) if m else None))
    return out


def run_submission(
    lab: LabSpec,
    source: str,
    *,
    compiled: CompileResult,
    secret: str,
    sanitizer: bool | None = None,
    timing: bool = True,
) -> GradeReport:
    """The run stage for a compiled submission; never raises for anything the student did.

    `timing=False` skips the timed repetitions (and so performance points): for tests that
    only check correctness.
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
    seeds = {c.name: case_seed(lab.id, c.name, hidden=c.hidden, secret=secret) for c in lab.cases}
    if not compiled.ok or not compiled.cubin:
        report.error = "compile_error"
        report.cases = [
            _not_run(c, seeds[c.name], "Not run: the submission did not compile.")
            for c in lab.cases
        ]
        report.summary = compiled.message
        return report
    reason = gpu_unavailable_reason()
    if reason:
        report.error = "no_gpu"
        report.cases = [_not_run(c, seeds[c.name], f"Not run: {reason}") for c in lab.cases]
        report.summary = f"Compiled; running waits for a GPU worker. {reason}"
        return report
    began = time.monotonic()
    report.cases = _run_stage(lab, compiled, seeds, report, timing=timing)
    report.stage_seconds["run"] = round(time.monotonic() - began, 3)
    if (lab.sanitizer if sanitizer is None else sanitizer) and not report.error:
        began = time.monotonic()
        found, note = _sanitizer_stage(lab, source, compiled, seeds)
        report.findings += found
        if note:
            report.stdout += f"\n[grader] sanitizer: {note}"
        report.stage_seconds["sanitizer"] = round(time.monotonic() - began, 3)
    _score(lab, report)
    return report


def _score(lab: LabSpec, report: GradeReport) -> None:
    report.correctness_points = scoring.correctness_points(report.cases)
    timed = next((c for c in report.cases if c.timing is not None), None)
    ref_ms = {k: v.median_ms for k, v in timed.reference_timings.items()} if timed else {}
    perf = scoring.performance_score(
        max_points=float(lab.scoring.performance_points),
        all_passed=all(c.passed for c in report.cases),
        time_ms=timed.timing.median_ms if timed and timed.timing else None,
        reference_ms=ref_ms,
        baseline=lab.scoring.baseline or "",
        target=lab.scoring.target or "",
    )
    report.performance_points = perf.points
    report.score = round(report.correctness_points + perf.points, 2)
    speed = ""
    if timed and timed.timing and lab.scoring.baseline:
        speed = scoring.speedup_phrase(timed.timing.median_ms, ref_ms, lab.scoring.baseline)
    summary = scoring.summary_sentence(report.cases, perf, speed)
    if perf.sentence and lab.scoring.performance_points:
        summary += " " + perf.sentence
    if report.error == "gpu_unhealthy":
        summary += " The GPU was not healthy after the kernel stopped; an administrator was told."
    report.summary = summary if not report.summary else report.summary + " " + summary


def grade_source(
    lab: LabSpec,
    source: str,
    *,
    secret: str,
    sanitizer: bool | None = None,
    timing: bool = True,
) -> GradeReport:
    """Compile for this worker's GPU, then run; for tests, the CLI and the bench."""
    compiled = _compile(lab, source, line_info=False)
    return run_submission(
        lab, source, compiled=compiled, secret=secret, sanitizer=sanitizer, timing=timing
    )
