"""The profiling stage's parent side: compile with line info, run ncu in a sandboxed child.

`profile_submission` is called by the worker's profiling job (never inside a grading: it
runs after, at a lower priority) and by `lab check` on a GPU host. It compiles the
submission, and each reference that has no kept profile on this GPU model, with `-lineinfo`
for this run only, then profiles them all in one sandboxed GPU child, with the run stage's
kind of limits and no more privilege; the child holds the GPU's lock shared (never during a
timed section). A missing ncu, a MIG slice, counters an unprivileged user may not read: one
sentence in the result's `message`, and the grading is untouched.
"""

from __future__ import annotations

import base64
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from graders.gpu import check_gpu_health, lock_dir
from graders.profile import tool
from graders.profile.tool import YIELDED
from graders.results import CompileResult
from graders.sandbox.limits import SandboxLimits
from graders.sandbox.runner import run_sandboxed
from graders.spec import LabSpec

log = logging.getLogger(__name__)
TARGET = "graders.profile.child:profile_in_child"
DEFAULT_TIMEOUT_S = 180.0


@dataclass
class ProfileRun:
    """One program's profile: the submission's, or a reference's."""

    name: str
    status: str  # "ok", or why not: "timeout", "kernel_failed", "no_report", ...
    message: str = ""  # a sentence where not ok
    summary: dict[str, Any] = field(default_factory=dict)  # graders.profile.extract
    report: bytes | None = None  # the .ncu-rep file (the submission's, when small enough)
    report_bytes: int = 0
    seconds: float = 0.0
    tool_output: str = ""  # the end of ncu's output: why a profile did not come, for staff

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def tool_said(self, lines: int = 3) -> str:
        """ncu's own error and warning lines (the last few), where it said any."""
        said = [
            line.strip()
            for line in self.tool_output.splitlines()
            if line.startswith(("==ERROR==", "==WARNING=="))
        ]
        return " ".join(said[-lines:])


@dataclass
class ProfileResult:
    # "ok"; "unavailable" (this worker cannot profile: `message` says why, nothing is wrong);
    # "failed" (the profile did not come: `message` says why); "yielded" (it let a timed
    # section have the GPU: to be run again, see graders.profile.child).
    status: str
    message: str = ""
    case: str = ""
    submission: ProfileRun | None = None
    references: dict[str, ProfileRun] = field(default_factory=dict)
    ncu_version: str = ""
    gpu: str = ""
    seconds: float = 0.0
    log: list[str] = field(default_factory=list)  # for the worker's log, never a student


def timeout_for(lab: LabSpec, programs: int, configured: float | None = None) -> float:
    """How long ncu may take for all programs: each kernel runs some 40 times under replay."""
    base = configured if configured is not None else DEFAULT_TIMEOUT_S
    return min(600.0, base + 30.0 * max(0, programs - 1) + 4 * lab.limits.case_seconds)


def _compile(lab: LabSpec, source: str, filename: str, arch: str | None) -> CompileResult:
    from graders.compile.compiler import compile_submission

    return compile_submission(lab, source, arch=arch, filename=filename, line_info=True)


def _program(name: str, compiled: CompileResult, source: str, filename: str) -> dict[str, Any]:
    return {
        "name": name,
        "cubin_b64": base64.b64encode(compiled.cubin or b"").decode("ascii"),
        "declarations": compiled.declarations,
        "source": source,
        "filename": filename,
    }


def profile_submission(
    lab: LabSpec,
    source: str,
    *,
    seed: int,
    filename: str = "submission.cu",
    arch: str | None = None,
    references: list[str] | None = None,
    timeout_s: float | None = None,
    compiled: CompileResult | None = None,
    yield_to_timing: bool = False,
) -> ProfileResult:
    """Profile the submission (and the named references) on `lab.profile_case`.

    `yield_to_timing`: stop as soon as a timed section waits for the GPU (status `yielded`),
    for a caller that runs it again later (the worker's profiling job)."""
    began = time.monotonic()
    case = lab.profile_case
    reason = tool.unavailable_reason()
    if reason:
        return ProfileResult("unavailable", reason, case=case.name)
    from graders.compile.compiler import safe_filename

    filename = safe_filename(filename)
    compiled = compiled or _compile(lab, source, filename, arch)
    if not compiled.ok or not compiled.cubin:
        return ProfileResult(
            "failed",
            f"It did not compile for profiling: {compiled.message}",
            case=case.name,
        )
    programs = [_program("submission", compiled, source, filename) | {"keep_report": True}]
    skipped: list[str] = []
    ref_lab = lab.for_references()
    for name in references or []:
        ref = lab.reference(name)
        if ref.builtin or not ref.file:
            skipped.append(name)  # a library (cuBLAS) is not the student's ladder to climb
            continue
        ref_compiled = _compile(ref_lab, ref.source, ref.file, arch)
        if ref_compiled.ok and ref_compiled.cubin:
            programs.append(_program(name, ref_compiled, ref.source, ref.file))
        else:
            log.warning("reference %s of lab %s does not compile for profiling", name, lab.id)
    timeout = timeout_for(lab, len(programs), timeout_s)
    payload = {
        "ncu": tool.executable(),
        "lab_folder": str(lab.folder),
        "case": case.name,
        "seed": seed,
        "kernels": list(lab.kernels),
        "launches": len(lab.launches),
        "timeout_s": timeout,
        "lock_dir": str(lock_dir()),
        "programs": programs,
        "yield_to_timing": yield_to_timing,
    }
    limits = SandboxLimits(
        wall_seconds=timeout + 60,
        cpu_seconds=int(timeout) * 8 + 120,
        memory_mb=max(lab.limits.memory_mb, 4096) + 8192,
        max_processes=1024,
        max_open_files=1024,
        max_file_size_mb=512,
        stdout_limit_bytes=65536,
    )
    outcome = run_sandboxed(TARGET, payload, limits=limits, gpu=True)
    result = ProfileResult("failed", case=case.name, log=list(outcome.log))
    if not outcome.ok or outcome.value is None:
        log.warning("profile child for lab %s: %s", lab.id, "\n".join(outcome.log)[-4000:])
        if outcome.timed_out:
            result.message = f"Profiling was stopped at its time limit of {timeout:g} s."
            health = check_gpu_health()
            if health:
                result.log.append(health)
        else:
            result.message = (
                "Profiling could not finish on our side; this is not your code's fault "
                f"({outcome.message or outcome.reason})."
            )
        result.seconds = round(time.monotonic() - began, 3)
        return result
    value = outcome.value
    result.ncu_version = str(value.get("version", ""))
    result.log += [str(n) for n in value.get("notes", [])]
    runs = [_run_of(r) for r in value.get("runs", [])]
    if not runs:
        result.status, result.message = "unavailable", str(value.get("note") or tool.NOT_INSTALLED)
        return result
    yielded = next((r for r in runs if r.status == YIELDED), None)
    if yielded is not None:
        result.status, result.message = YIELDED, yielded.message
        result.seconds = round(time.monotonic() - began, 3)
        return result
    mine = runs[0]
    result.submission = mine
    result.references = {r.name: r for r in runs[1:] if r.ok}
    for r in runs:
        if r.status not in ("ok",):
            log.info("profile of %s (lab %s): %s", r.name, lab.id, r.status)
            said = r.tool_said()
            if said:
                result.log.append(f"ncu on {r.name}: {said}")
    result.gpu = str(mine.summary.get("gpu", "")) if mine.ok else ""
    if mine.ok:
        result.status = "ok"
    elif mine.status in ("counters_not_permitted", "no_reader"):
        result.status, result.message = "unavailable", mine.message
    else:
        result.message = mine.message
    if skipped:
        result.log.append(f"not profiled (library references): {', '.join(skipped)}")
    result.seconds = round(time.monotonic() - began, 3)
    return result


def _run_of(raw: dict[str, Any]) -> ProfileRun:
    report = raw.get("report_b64")
    return ProfileRun(
        name=str(raw.get("name", "")),
        status=str(raw.get("status", "")),
        message=str(raw.get("message", "")),
        summary=dict(raw.get("summary") or {}),
        report=base64.b64decode(report) if report else None,
        report_bytes=int(raw.get("report_bytes", 0) or 0),
        seconds=float(raw.get("seconds", 0.0) or 0.0),
        tool_output=str(raw.get("output_tail", "")),
    )
