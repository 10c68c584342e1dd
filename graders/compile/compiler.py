"""Compile a submission with NVRTC in a sandboxed child: a cubin, or a verdict for the student.

Stages, each a `CompileResult` with ok=False, a `reason` and one sentence when it fails:
1. the include policy (`forbidden_include`), before the compiler sees anything;
2. NVRTC under the lab's wall-clock and memory limits (`compile_error`, `timeout`,
   `resource_limit`, `internal`), its log cleaned of anything not about the student's file;
   a compiled kernel larger than `MAX_CUBIN_BYTES` is `resource_limit`;
3. the cubin's own tables: every kernel the lab names exists as an `extern "C"` entry
   (`missing_kernel`, naming which) with the parameter sizes the grader will pass
   (`wrong_signature`);
4. the declarations the launch depends on, read from the compiled program
   (`graders.compile.declared_values`; `bad_declaration`), then the lab's requirements
   (`missing_requirement`: `__shared__` from the kernel's shared memory in the cubin, other
   tokens from the text outside comments) and dynamic shared memory the lab does not give
   (`no_dynamic_shared_memory`);
5. static warnings (the barrier problem, a near-miss spelling of a declared name), which do
   not fail the compile.

Stages 1 to 5 read what the student wrote, so they all run in the sandboxed child
(`graders.compile.pipeline`); this process only builds the payload, applies the lab's
expressions to the child's facts, and makes every text fit to show (`graders.text`). What the
child itself prints (Python warnings, a traceback) goes to this process's log, never to the
student.
"""

from __future__ import annotations

import base64
import functools
import logging
import math
import os
import re
import signal
import time
from typing import Any

from graders.compile.headers import BUILTIN_HEADERS
from graders.compile.pipeline import compile_in_child
from graders.config import FALLBACK_ARCH
from graders.results import CompileResult
from graders.sandbox.runner import SandboxLimits, SandboxOutcome, run_sandboxed
from graders.spec import LabSpec
from graders.text import visible_text

__all__ = ["COMPILE_TARGET", "compile_in_child", "compile_payload", "compile_submission"]

log = logging.getLogger(__name__)

COMPILE_TARGET = "graders.compile.pipeline:compile_in_child"
_ARCH = re.compile(r"^sm_\d{2,3}[a-z]?$")
_FILENAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
# Importing CuPy and loading NVRTC needs this much address space before any compiling.
MIN_COMPILE_MEMORY_MB = 1024
# The largest cubin a submission may compile to: it travels in the child's answer (64 MiB at
# most, base64) and to every run child. Initialized `__device__` arrays are what make it big.
MAX_CUBIN_BYTES = 16 << 20
# A compiler that crashes on a file is tried once more (a crash can be the machine's); twice
# is the file's verdict.
COMPILE_ATTEMPTS = 2
# The reasons a compile can fail with (the rest are read as the grader's own, "internal").
REASONS = frozenset(
    {"compile_error", "missing_kernel", "wrong_signature", "bad_declaration",
     "forbidden_include", "resource_limit", "internal"}
)  # fmt: skip


@functools.cache
def default_arch(fallback: str = FALLBACK_ARCH) -> str:
    """The worker GPU's architecture, else `fallback` (the worker's setting: graders.config)."""
    try:
        from graders.gpu import detect_arch

        detected = detect_arch()
    except Exception:  # no GPU module or a broken driver: compiling must still work
        detected = None
    if detected and _ARCH.match(detected):
        return detected
    return fallback if _ARCH.match(fallback) else FALLBACK_ARCH


def safe_filename(filename: str) -> str:
    """The name shown in the log: the uploaded file's base name when it is plain, else a default."""
    base = os.path.basename(filename or "")
    return base if _FILENAME.match(base) else "submission.cu"


def nvrtc_options(lab: LabSpec, arch: str, *, line_info: bool) -> list[str]:
    options = [f"--gpu-architecture={arch}", "--no-source-include", "-DKERNELGRADER=1"]
    if not any(o.startswith(("-std", "--std")) for o in lab.nvrtc_options):
        options.append("-std=c++17")
    options += lab.nvrtc_options
    if line_info:
        options.append("-lineinfo")
    return options


def compile_payload(
    lab: LabSpec, source: str, *, arch: str, filename: str, line_info: bool
) -> dict[str, Any]:
    """Everything the compile child needs, as plain JSON."""
    return {
        "source": source,
        "filename": safe_filename(filename),
        "options": nvrtc_options(lab, arch, line_info=line_info),
        "headers": BUILTIN_HEADERS,
        "kernels": [
            {
                "name": kernel,
                "c_signature": lab.c_signature(kernel),
                "signature_sizes": lab.signature_sizes(kernel),
            }
            for kernel in lab.kernels
        ],
        "declares": {
            name: {
                "names": list(d.names),
                "default": d.default,
                "min": d.min,
                "max": d.max,
                "multiple_of": d.multiple_of,
                "power_of_two": d.power_of_two,
            }
            for name, d in lab.declares.items()
        },
        "requires_text": [t for t in lab.requires if t != "__shared__"],
        "max_cubin_bytes": MAX_CUBIN_BYTES,
        "max_global_bytes": lab.limits.device_globals_mb << 20,
        "attempt": 1,
    }


def _failed(reason: str, message: str, **fields: Any) -> CompileResult:
    return CompileResult(ok=False, reason=reason, message=visible_text(message), **fields)


def compile_submission(
    lab: LabSpec,
    source: str,
    *,
    arch: str | None = None,
    filename: str = "submission.cu",
    line_info: bool = False,
    timeout_s: float | None = None,
) -> CompileResult:
    """Compile a student's source for `arch`; never raises for bad input (see module doc)."""
    started = time.perf_counter()
    try:
        return _compile(lab, source, arch, filename, line_info, timeout_s, started)
    except Exception:  # a grader bug must not become a worker crash
        log.exception("compiling a submission to lab %s failed in the grader", lab.id)
        return _failed(
            "internal",
            "The grader failed while compiling this file; this is not your fault, please tell "
            "the course staff.",
            arch=arch or "", kernel=lab.kernel, seconds=round(time.perf_counter() - started, 3),
        )  # fmt: skip


def _compile(
    lab: LabSpec,
    source: str,
    arch: str | None,
    filename: str,
    line_info: bool,
    timeout_s: float | None,
    started: float,
) -> CompileResult:
    arch = arch or default_arch()
    if not _ARCH.match(arch):
        return _failed(
            "internal", f"The architecture {arch!r} is not one NVRTC knows.", arch=arch,
            kernel=lab.kernel,
        )  # fmt: skip
    wall = float(timeout_s if timeout_s is not None else lab.limits.compile_seconds)
    limits = SandboxLimits(
        wall_seconds=wall,
        cpu_seconds=math.ceil(wall) + 5,  # the wall clock should be what stops a bomb
        memory_mb=max(lab.limits.memory_mb, MIN_COMPILE_MEMORY_MB),
    )
    payload = compile_payload(lab, source, arch=arch, filename=filename, line_info=line_info)
    for attempt in range(1, COMPILE_ATTEMPTS + 1):
        payload["attempt"] = attempt
        outcome = run_sandboxed(COMPILE_TARGET, payload, limits=limits, pool="compile")
        if not compiler_crashed(outcome):
            break
        log.warning(
            "compile child for lab %s crashed on attempt %d of %d: %s (%s)",
            lab.id, attempt, COMPILE_ATTEMPTS, outcome.message, "; ".join(outcome.log),
        )  # fmt: skip
    return result_from_outcome(lab, outcome, arch=arch, limits=limits, started=started)


def compiler_crashed(outcome: SandboxOutcome) -> bool:
    """The compile child died (a signal, an abort, an exit without an answer) after it
    started: NVRTC crashing on the file. A child that could not start, or the grader's own
    exception, is not this: those stay the grader's failure."""
    return not outcome.ok and outcome.reason == "crashed"


def result_from_outcome(
    lab: LabSpec, outcome: SandboxOutcome, *, arch: str, limits: SandboxLimits, started: float
) -> CompileResult:
    """The student's verdict from how the compile child ended; its own output is logged here."""
    common: dict[str, Any] = {"arch": arch, "kernel": lab.kernel}
    seconds = round(time.perf_counter() - started, 3)
    # The child's own words (Python warnings, a traceback, the sandbox's notes) hold host paths:
    # they are for the worker's log only.
    level = logging.DEBUG if outcome.ok else logging.WARNING
    log.log(level, "compile child for lab %s: %s", lab.id, "; ".join(outcome.log))
    if outcome.stdout.strip():
        log.warning("compile child for lab %s printed: %s", lab.id, outcome.stdout[-8000:])
    if not outcome.ok or not isinstance(outcome.value, dict):
        message = _ending(outcome) if outcome.reason == "crashed" else outcome.message
        return _sandbox_failure(outcome.reason, message, limits, seconds, common)
    value = outcome.value
    log.info("compile child for lab %s: %s", lab.id, stage_line(value))
    text = visible_text(str(value.get("log", "")))
    reason = str(value.get("reason", ""))
    if not value.get("ok"):
        if reason == "resource_limit" and not value.get("message"):
            return _sandbox_failure(reason, "", limits, seconds, common)
        if reason not in REASONS:
            reason = "internal"
        return _failed(reason, str(value.get("message", "")), log=text, seconds=seconds,
                       **common)  # fmt: skip
    declarations = {str(k): int(v) for k, v in dict(value.get("declarations", {})).items()}
    problem = _requirement_problem(lab, value, declarations)
    if problem:
        return _failed(problem[0], problem[1], log=text, declarations=declarations,
                       seconds=seconds, **common)  # fmt: skip
    warnings = [visible_text(str(w), limit=4096) for w in list(value.get("warnings", []))[:11]]
    count = int(value.get("warning_count", len(warnings)))
    note = f" with {count} warning{'s' if count != 1 else ''}" if count else ""
    # Say which declared values the launch will use, so a student sees their TILE was read.
    declared = set(value.get("declared", []))
    used = ", ".join(f"{k} = {v}" for k, v in declarations.items() if k in declared)
    shared = dict(dict(value.get("shared", {})).get(lab.kernel, {}))
    return CompileResult(
        ok=True,
        message=f"Compiled for {arch}{f' ({used})' if used else ''}{note}.",
        log=text,
        declarations=declarations,
        warnings=warnings,
        cubin=base64.b64decode(str(value.get("cubin", ""))),
        seconds=seconds,
        uses_shared_memory=bool(shared.get("uses")),
        static_shared_bytes=int(shared.get("static_bytes", 0)),
        **common,
    )


def stage_line(value: dict[str, Any]) -> str:
    """The compile child's answer in one line for the worker's log: the file's size, each
    stage's seconds (the parsers, NVRTC, reading the cubin) and the parsers' steps."""
    stages = dict(value.get("stage_seconds") or {})
    timed = ", ".join(f"{stage} {float(s):.3f} s" for stage, s in stages.items())
    return (
        f"{value.get('characters', '?')} characters, {float(value.get('seconds', 0)):.3f} s "
        f"({timed or 'no stages timed'}), {value.get('steps', '?')} parser steps"
    )


def _ending(outcome: SandboxOutcome) -> str:
    if outcome.signal:
        try:
            return f"killed by {signal.Signals(outcome.signal).name}"
        except ValueError:
            return f"killed by signal {outcome.signal}"
    return f"exit status {outcome.exit_code}"


def _sandbox_failure(
    reason: str, message: str, limits: SandboxLimits, seconds: float, common: dict[str, Any]
) -> CompileResult:
    if reason == "timeout":
        return _failed(
            "timeout",
            f"The compiler was stopped after {limits.wall_seconds:g} s: compiling this file did "
            "not finish in time (a macro or template that expands without end can cause this).",
            seconds=seconds, **common,
        )  # fmt: skip
    if reason == "resource_limit":
        return _failed(
            "resource_limit",
            f"The compiler was stopped: compiling this file needed more than its "
            f"{limits.memory_mb} MiB of memory or its CPU time (a macro or template that "
            "expands without end can cause this).",
            seconds=seconds, **common,
        )  # fmt: skip
    if reason == "crashed":
        return _failed(
            "resource_limit",
            f"The compiler crashed on this file ({message}) each time it was tried, so it "
            "could not be compiled. Compilers fail like this on code that needs enormous work or "
            "memory, such as templates instantiated millions of times or very deep recursion "
            "in constant expressions: write that part more simply. If your file is an ordinary "
            "kernel, tell the course staff.",
            seconds=seconds, **common,
        )  # fmt: skip
    return _failed(
        "internal",
        f"The compiler stopped unexpectedly ({message or reason}); this is not your fault, "
        "please resubmit, and tell the course staff if it happens again.",
        seconds=seconds, **common,
    )  # fmt: skip


def _requirement_problem(
    lab: LabSpec, value: dict[str, Any], declarations: dict[str, int]
) -> tuple[str, str] | None:
    """The lab's rules on what the compiled kernels do: shared memory where the lab requires it
    (in any of its kernels), and dynamic shared memory only where the lab launches a kernel
    with some."""
    by_kernel = dict(value.get("shared", {}))
    uses_shared = False
    for kernel in lab.kernels:
        shared = dict(by_kernel.get(kernel, {}))
        uses, static_bytes = bool(shared.get("uses")), int(shared.get("static_bytes", 0))
        dynamic = _least_dynamic_shared(lab, declarations, kernel)
        if uses and not static_bytes and dynamic == 0:
            return (
                "no_dynamic_shared_memory",
                f"Your kernel `{kernel}` uses dynamic shared memory (`extern __shared__`), but "
                "this lab launches it with none, so every access to it would be out of bounds. "
                "Declare the array with a fixed size instead, e.g. "
                "`__shared__ float tile[TILE_WIDTH][TILE_WIDTH];`.",
            )
        uses_shared = uses_shared or bool(static_bytes or (uses and dynamic))
    if "__shared__" in lab.requires and not uses_shared:
        which = (
            f"your kernel `{lab.kernel}`"
            if len(lab.kernels) == 1
            else f"one of your kernels ({', '.join(lab.kernels)})"
        )
        return (
            "missing_requirement",
            f"This lab requires {which} to use shared memory (`__shared__`), but the compiled "
            "code uses none: an array the kernel never reads or writes is removed by the "
            "compiler, and code in a comment or under `#if 0` does not count. Load the tiles "
            "into `__shared__` arrays as the lab page describes.",
        )
    for token in value.get("missing_tokens", []):
        return (
            "missing_requirement",
            f"This lab requires your kernel to use `{token}`, which does not appear in the "
            "file (outside comments); see the lab page for what the kernel must do.",
        )
    return None


def _least_dynamic_shared(lab: LabSpec, declarations: dict[str, int], kernel: str) -> int | None:
    """The fewest bytes of dynamic shared memory any launch of `kernel` gets in any case; None
    when the lab's expressions cannot say (the check is then left out)."""
    try:
        values = [
            launch.geometry(lab.sizes_for(case, declarations))[2]
            for case in lab.cases
            for launch in lab.launches
            if (launch.kernel or lab.kernel) == kernel
        ]
    except Exception:  # an expression this lab cannot evaluate here: not the student's fault
        log.warning("lab %s: dynamic shared memory could not be evaluated", lab.id, exc_info=True)
        return None
    return min(values, default=0)
