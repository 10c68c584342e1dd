"""Compile a submission with NVRTC in a sandboxed child: a cubin, or a verdict for the student.

Stages, each a `CompileResult` with ok=False, a `reason` and one sentence when it fails:
1. the include policy (`forbidden_include`), before the compiler sees anything;
2. NVRTC in a child under the lab's wall-clock and memory limits (`compile_error`, `timeout`,
   `resource_limit`, `internal`), its log cleaned of anything not about the student's file;
3. the cubin's own tables: the lab's kernel exists as an `extern "C"` entry (`missing_kernel`)
   with the parameter sizes the grader will pass (`wrong_signature`);
4. the declarations the launch depends on (`bad_declaration`) and the tokens the lab requires
   (`missing_requirement`);
5. static warnings (the barrier problem), which do not fail the compile.
"""

from __future__ import annotations

import base64
import functools
import math
import os
import re
import time
from typing import Any

from graders.compile.cubin import CubinError, demangled_base, kernel_names, kernel_params
from graders.compile.declarations import DeclarationError, find_declarations, resolve_declarations
from graders.compile.include_policy import BUILTIN_HEADERS, check_includes, without_line_directives
from graders.compile.log import clean_log, count_errors, first_error
from graders.compile.source_text import SourceViews
from graders.compile.static_checks import find_barrier_problems
from graders.results import CompileResult
from graders.sandbox.runner import SandboxLimits, run_sandboxed
from graders.spec import LabSpec

COMPILE_TARGET = "graders.compile.compiler:compile_in_child"
FALLBACK_ARCH = "sm_90"
_ARCH = re.compile(r"^sm_\d{2,3}[a-z]?$")
_FILENAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
# Importing CuPy and loading NVRTC needs this much address space before any compiling.
MIN_COMPILE_MEMORY_MB = 1024
MAX_WARNINGS = 10
# A warning flood makes megabytes of log; only the first part is ever shown.
MAX_CHILD_LOG_CHARS = 1_000_000


@functools.cache
def default_arch() -> str:
    """The worker GPU's architecture, else KERNELGRADER_DEFAULT_ARCH, else sm_90."""
    try:
        from graders.gpu import detect_arch

        detected = detect_arch()
    except Exception:  # no GPU module or a broken driver: compiling must still work
        detected = None
    if detected and _ARCH.match(detected):
        return detected
    configured = os.environ.get("KERNELGRADER_DEFAULT_ARCH", "").strip()
    return configured if _ARCH.match(configured) else FALLBACK_ARCH


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


def compile_in_child(payload: dict[str, Any]) -> dict[str, Any]:
    """Run NVRTC (in the sandboxed child): source in, log and base64 cubin out."""
    try:  # the binding itself, without importing all of CuPy (a faster child start)
        from cupy_backends.cuda.libs import nvrtc
    except ImportError:
        from cupy.cuda import nvrtc

    started = time.perf_counter()
    headers: dict[str, str] = payload.get("headers", {})
    program = nvrtc.createProgram(
        payload["source"],
        payload["filename"],
        [text.encode() for text in headers.values()],
        [name.encode() for name in headers],
    )
    try:
        try:
            nvrtc.compileProgram(program, list(payload["options"]))
            ok, error = True, ""
        except nvrtc.NVRTCError as exc:
            ok, error = False, str(exc)
        log = nvrtc.getProgramLog(program)[:MAX_CHILD_LOG_CHARS]
        cubin = nvrtc.getCUBIN(program) if ok else b""
    finally:
        nvrtc.destroyProgram(program)
    return {
        "ok": ok,
        "error": error,
        "log": log,
        "cubin": base64.b64encode(cubin).decode("ascii"),
        "seconds": time.perf_counter() - started,
    }


def _failed(reason: str, message: str, **fields: Any) -> CompileResult:
    return CompileResult(ok=False, reason=reason, message=message, **fields)


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
    except Exception as exc:  # a grader bug must not become a worker crash
        return _failed(
            "internal",
            f"The grader failed while compiling this file ({type(exc).__name__}: {exc}); this "
            "is not your fault, please tell the course staff.",
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
    name = safe_filename(filename)
    common = {"arch": arch, "kernel": lab.kernel}

    def elapsed() -> float:
        return round(time.perf_counter() - started, 3)

    problem = check_includes(source)
    if problem:
        return _failed("forbidden_include", problem, seconds=elapsed(), **common)
    if not _ARCH.match(arch):
        return _failed("internal", f"The architecture {arch!r} is not one NVRTC knows.", **common)

    wall = float(timeout_s if timeout_s is not None else lab.limits.compile_seconds)
    limits = SandboxLimits(
        wall_seconds=wall,
        cpu_seconds=math.ceil(wall) + 5,  # the wall clock should be what stops a bomb
        memory_mb=max(lab.limits.memory_mb, MIN_COMPILE_MEMORY_MB),
    )
    payload = {
        "source": without_line_directives(source),
        "filename": name,
        "options": nvrtc_options(lab, arch, line_info=line_info),
        "headers": BUILTIN_HEADERS,
    }
    outcome = run_sandboxed(COMPILE_TARGET, payload, limits=limits, pool="compile")
    if not outcome.ok or outcome.value is None:
        return _sandbox_failure(outcome.reason, outcome.message, wall, limits, elapsed(), common)

    value = outcome.value
    log = clean_log(str(value.get("log", "")), name, source)
    if not value.get("ok"):
        errors = count_errors(log, name)
        if "NVRTC_ERROR_COMPILATION" not in str(value.get("error")):  # options, not the source
            return _failed(
                "internal",
                f"The compiler could not start ({value.get('error')}); this is not your fault, "
                "please tell the course staff.",
                log=log, seconds=elapsed(), **common,
            )  # fmt: skip
        if _ran_out_of_memory(log, name):
            return _sandbox_failure("resource_limit", "", wall, limits, elapsed(), common)
        return _failed("compile_error", _error_sentence(errors, log, name), log=log,
                       seconds=elapsed(), **common)  # fmt: skip

    cubin = base64.b64decode(value.get("cubin", ""))
    verdict = _check_kernel(lab, cubin)
    if verdict:
        return _failed(verdict[0], verdict[1], log=log, seconds=elapsed(), **common)
    try:
        declarations = resolve_declarations(source, lab.declares)
    except DeclarationError as exc:
        return _failed("bad_declaration", str(exc), log=log, seconds=elapsed(), **common)
    missing = _missing_requirement(lab, source)
    if missing:
        return _failed("missing_requirement", missing, log=log, declarations=declarations,
                       seconds=elapsed(), **common)  # fmt: skip
    findings = find_barrier_problems(source)
    warnings = [f"Line {f.line}: {f.message}" for f in findings[:MAX_WARNINGS]]
    if len(findings) > MAX_WARNINGS:
        warnings.append(f"... and {len(findings) - MAX_WARNINGS} more warnings like these.")
    note = f" with {len(findings)} warning{'s' if len(findings) != 1 else ''}" if findings else ""
    # Say which declared values the launch will use, so a student sees their TILE was read.
    declared = {d.name for d in find_declarations(source, lab.declares)}
    used = ", ".join(f"{k} = {v}" for k, v in declarations.items() if k in declared)
    return CompileResult(
        ok=True,
        message=f"Compiled for {arch}{f' ({used})' if used else ''}{note}.",
        log=log,
        declarations=declarations,
        warnings=warnings,
        cubin=cubin,
        seconds=elapsed(),
        **common,
    )


def _sandbox_failure(
    reason: str, message: str, wall: float, limits: SandboxLimits, seconds: float,
    common: dict[str, Any],
) -> CompileResult:  # fmt: skip
    if reason == "timeout":
        return _failed(
            "timeout",
            f"The compiler was stopped after {wall:g} s: compiling this file did not finish in "
            "time (a macro or template that expands without end can cause this).",
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
    return _failed(
        "internal",
        f"The compiler stopped unexpectedly ({message or reason}); this is not your fault, "
        "please resubmit, and tell the course staff if it happens again.",
        seconds=seconds, **common,
    )  # fmt: skip


def _ran_out_of_memory(log: str, filename: str) -> bool:
    """NVRTC reports a failed allocation (under the memory limit) as an error of its own."""
    first = first_error(log, filename)
    return first is not None and first[1].lower().startswith("out of memory")


def _error_sentence(errors: int, log: str, filename: str) -> str:
    first = first_error(log, filename)
    plural = "error" if errors == 1 else "errors"
    if first is None:
        return f"The compiler reported {errors} {plural}; see the log below."
    where, text = first
    lead = "it is" if errors == 1 else "the first is"
    return f"The compiler reported {errors} {plural}; {lead} {where}: {text}"


def _check_kernel(lab: LabSpec, cubin: bytes) -> tuple[str, str] | None:
    try:
        found = kernel_names(cubin)
    except CubinError as exc:
        return "internal", f"The compiler's output could not be read ({exc}); please resubmit."
    expected = lab.c_signature()
    if lab.kernel not in found:
        return "missing_kernel", _missing_kernel_sentence(lab.kernel, found, expected)
    params = kernel_params(cubin, lab.kernel)
    if params is None:  # an unknown table layout: leave the check to the run stage
        return None
    got = [p.size for p in params]
    want = lab.signature_sizes()
    if got != want:
        return (
            "wrong_signature",
            f"Your kernel `{lab.kernel}` takes {len(got)} parameter"
            f"{'s' if len(got) != 1 else ''} of {_sizes(got)} bytes, but the grader calls it "
            f"as `{expected}` ({_sizes(want)} bytes); change the parameters to match, in "
            "that order.",
        )
    return None


def _sizes(sizes: list[int]) -> str:
    return ", ".join(str(s) for s in sizes) or "no"


def _missing_kernel_sentence(kernel: str, found: list[str], expected: str) -> str:
    if not found:
        return (
            f"No kernel named `{kernel}` was found: the file defines no __global__ function. "
            f"This lab expects `{expected}`."
        )
    mangled = [n for n in found if demangled_base(n) == kernel and n != kernel]
    if mangled:
        return (
            f"No kernel named `{kernel}` was found: your `{kernel}` is compiled as a C++ "
            f"function (its symbol is `{mangled[0]}`), so the grader cannot find it by name; "
            f'declare it `extern "C"`, as in `{expected}`.'
        )
    shown = ", ".join(
        f"{demangled_base(n)} (C++ symbol {n})" if n.startswith("_Z") else n for n in found
    )
    return (
        f"No kernel named `{kernel}` was found; the file defines: {shown}. This lab expects "
        f"`{expected}`; rename your kernel or add it."
    )


def _missing_requirement(lab: LabSpec, source: str) -> str | None:
    # The lab's own reference kernels are trusted: the naive baseline of a tiled lab need not
    # use shared memory.
    if not lab.requires or any(ref.file and ref.source == source for ref in lab.references):
        return None
    bare = SourceViews.of(source).bare
    for token in lab.requires:
        if not re.search(rf"(?<!\w){re.escape(token)}(?!\w)", bare):
            return (
                f"This lab requires your kernel to use `{token}`, which does not appear in the "
                "file (outside comments); see the lab page for what the kernel must do."
            )
    return None
