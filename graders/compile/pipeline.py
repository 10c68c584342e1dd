"""The compile child's work: every parser of the student's text, NVRTC, and the cubin's tables.

`compile_in_child(payload)` is the sandbox target (`graders.compile.pipeline:compile_in_child`).
It runs in the sandboxed child under the compile step's time and memory limits, never in the
worker: the include policy, NVRTC, the log cleaner, the cubin reader, the declarations reader
and the static checks all read what a student wrote, and each is linear in it (see
`graders.compile.work`). Self-contained: everything it needs comes in the payload (plain JSON,
built by `graders.compile.compiler.compile_payload`), so a child started ahead of need can take
any payload. The answer carries the verdicts that need no lab beyond the payload; the worker
adds those that need the lab's expressions (shared memory) and makes every text fit to show.

NVRTC compiles a generated wrapper that includes the student's file and reads the lab's
declared names from it (`graders.compile.declared_values`); the cubin that runs is that
program's. The answer also carries each stage's seconds (`stage_seconds`), which the worker
logs for the staff.
"""

from __future__ import annotations

import base64
import re
import time
from typing import Any

from graders.compile import work
from graders.compile.cubin import (
    CubinError,
    demangled_base,
    global_variables,
    kernel_names,
    kernel_params,
    shared_section_size,
)
from graders.compile.declarations import (
    DeclarationError,
    declarations_in,
    defined_constants,
    near_misses_in,
    probe_names,
    resolve,
    unread_notes,
)
from graders.compile.declared_values import (
    WRAPPER_NAME,
    compile_with_probes,
    too_large_to_expand,
)
from graders.compile.include_policy import refused_by_compiler, review
from graders.compile.log import (
    NO_LINE,
    clean_log,
    count_errors,
    first_error,
    prioritized,
    static_shared_bytes,
    without_ptxas_info,
)
from graders.compile.preprocess import Live, Program, preprocess, target_from_options
from graders.compile.source_text import SourceViews
from graders.compile.static_checks import find_barrier_problems
from graders.spec import DeclareSpec

MAX_WARNINGS = 10
# A warning flood makes megabytes of log; only the first part is ever shown (errors first).
MAX_CHILD_LOG_CHARS = 1_000_000
# A lab's default limit on the module's global variables (its `limits.device_globals_mb`).
DEFAULT_MAX_GLOBAL_BYTES = 1 << 30
BYTE_ORDER_MARK = "\ufeff"
# Asks ptxas for each kernel's static shared memory (its lines are removed from the log).
PTXAS_VERBOSE = "--ptxas-options=-v"


def nvrtc_compile(
    source: str, filename: str, options: list[str], headers: dict[str, str]
) -> tuple[bool, str, str, bytes]:
    """(ok, NVRTC's error name, log decoded leniently, cubin) for one program."""
    try:  # the binding itself, without importing all of CuPy (a faster child start)
        from cupy_backends.cuda.libs import nvrtc
    except ImportError:
        from cupy.cuda import nvrtc

    program = nvrtc.createProgram(
        source,
        filename,
        [text.encode() for text in headers.values()],
        [name.encode() for name in headers],
    )
    try:
        try:
            nvrtc.compileProgram(program, list(options))
            ok, error = True, ""
        except nvrtc.NVRTCError as exc:
            ok, error = False, str(exc)
        try:
            log = nvrtc.getProgramLog(program)
        except UnicodeDecodeError as exc:  # `#pragma message("\xff")` puts any byte in it
            log = bytes(exc.object).decode("utf-8", errors="replace")
        cubin = nvrtc.getCUBIN(program) if ok else b""
    finally:
        nvrtc.destroyProgram(program)
    return ok, error, prioritized(log.replace("\x00", ""), MAX_CHILD_LOG_CHARS), cubin


def nvrtc_version() -> tuple[int, int] | None:
    """NVRTC's (major, minor), which its `__CUDACC_VER_*__` macros say; None if unknown."""
    try:
        from cupy_backends.cuda.libs import nvrtc

        major, minor = nvrtc.getVersion()
        return int(major), int(minor)
    except Exception:  # no NVRTC here: the preprocessor then leaves those macros unknown
        return None


class _Stages:
    """Seconds each stage of the compile child took, for the worker's log (the staff's)."""

    def __init__(self) -> None:
        self._last = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def mark(self, stage: str) -> None:
        now = time.perf_counter()
        self.seconds[stage] = round(self.seconds.get(stage, 0.0) + now - self._last, 4)
        self._last = now


def compile_in_child(payload: dict[str, Any]) -> dict[str, Any]:
    """Sandbox target: source and lab facts in, a verdict (and the cubin) out."""
    started = time.perf_counter()
    before = work.METER.steps
    stages = _Stages()
    answer = _compile(payload, stages)
    stages.mark("answer")
    answer["seconds"] = time.perf_counter() - started
    answer["steps"] = work.METER.steps - before
    answer["stage_seconds"] = stages.seconds
    answer["characters"] = len(payload["source"])
    return answer


def _verdict(reason: str, message: str, **fields: Any) -> dict[str, Any]:
    return {"ok": False, "reason": reason, "message": message, **fields}


def _declares(payload: dict[str, Any]) -> dict[str, DeclareSpec]:
    return {
        key: DeclareSpec(
            key,
            tuple(d["names"]),
            d["default"],
            d["min"],
            d["max"],
            d.get("multiple_of"),
            bool(d.get("power_of_two", False)),
        )
        for key, d in payload.get("declares", {}).items()
    }


def _compile(payload: dict[str, Any], stages: _Stages) -> dict[str, Any]:
    # A Windows editor's byte-order mark: NVRTC reads it as a token ("unrecognized token" on
    # line 1). The stored file keeps it; what is compiled starts after it.
    source: str = payload["source"].removeprefix(BYTE_ORDER_MARK)
    headers: dict[str, str] = payload.get("headers", {})
    # The student's file is a header of the wrapper NVRTC compiles, under its own name (the
    # names in the log), unless that is the name of a header the grader serves.
    name: str = payload["filename"] if payload["filename"] not in headers else "submission.cu"
    target = target_from_options(payload["options"], nvrtc_version())
    stages.mark("load")  # the NVRTC binding, where the child had not loaded it yet
    program = preprocess(source, target, headers)
    stages.mark("preprocess")
    policy = review(program)
    stages.mark("include_policy")
    if policy.problem:
        return _verdict("forbidden_include", policy.problem)
    declares = _declares(payload)
    constants = defined_constants(program)
    names = probe_names(constants, declares) if declares else []
    too_large = [n for n in names if _expands(program, n) and too_large_to_expand(program, n)]
    stages.mark("declaration_sites")
    compiled = compile_with_probes(
        nvrtc_compile,
        policy.compile_source,
        name,
        [*payload["options"], PTXAS_VERBOSE],
        headers,
        [n for n in names if n not in too_large],
    )
    ok, error, raw_log, cubin = compiled.ok, compiled.error, compiled.log, compiled.cubin
    nvrtc_seconds = compiled.seconds
    stages.mark("nvrtc")
    refused = refused_by_compiler(raw_log, name, policy.rewritten)
    if refused:  # the grader read the line as dead or a comment; NVRTC did not
        return _verdict("forbidden_include", refused, nvrtc_seconds=nvrtc_seconds)
    shared_by_kernel = static_shared_bytes(raw_log)
    log = clean_log(without_ptxas_info(raw_log), name, source, hidden=(WRAPPER_NAME,))
    stages.mark("log")
    common: dict[str, Any] = {"log": log, "nvrtc_seconds": nvrtc_seconds}
    if not ok:
        if "NVRTC_ERROR_COMPILATION" not in error:  # the options, not the source
            return _verdict(
                "internal",
                f"The compiler could not start ({error}); this is not your fault, please tell "
                "the course staff.",
                **common,
            )
        first = first_error(log, name)
        if first is not None and first[1].lower().startswith("out of memory"):
            return _verdict("resource_limit", "", **common)  # the worker names the limit
        return _verdict("compile_error", error_sentence(log, name, source), **common)

    limit = int(payload.get("max_cubin_bytes", 16 << 20))
    if len(cubin) > limit:
        return _verdict(
            "resource_limit",
            f"The compiled kernel is {_mib(len(cubin))}; the limit is {_mib(limit)}. Large "
            "initialized `__device__` or `__constant__` arrays are stored in it: compute such "
            "tables in the kernel, or keep them small.",
            **common,
        )
    global_limit = int(payload.get("max_global_bytes", DEFAULT_MAX_GLOBAL_BYTES))
    problem = _globals_problem(cubin, global_limit, compiled.nonce)
    if problem:
        return _verdict("resource_limit", problem, **common)
    kernels = _kernels(payload)
    for kernel in kernels:
        verdict = _check_kernel(kernel, [k["name"] for k in kernels], cubin)
        if verdict:
            return _verdict(*verdict, **common)

    stages.mark("cubin")
    readings = compiled.readings(too_large)
    found = declarations_in(constants, declares, readings)
    try:
        declarations = resolve(found, declares)
    except DeclarationError as exc:
        return _verdict("bad_declaration", str(exc), **common)
    warnings = unread_notes(found, declares)
    warnings += near_misses_in(constants, declares, readings)
    stages.mark("declarations")
    warnings += [f"Line {f.line}: {f.message}" for f in find_barrier_problems(program)]
    stages.mark("static_checks")
    warning_count = len(warnings)
    if warning_count > MAX_WARNINGS:
        more = warning_count - MAX_WARNINGS
        warnings = [*warnings[:MAX_WARNINGS], f"... and {more} more warnings like these."]
    shared = {}
    for kernel in kernels:
        section = shared_section_size(cubin, kernel["name"])
        shared[kernel["name"]] = {
            "uses": section is not None,
            "static_bytes": shared_by_kernel.get(kernel["name"], 0) if section is not None else 0,
        }
    return {
        "ok": True,
        "reason": "",
        "message": "",
        **common,
        "cubin": base64.b64encode(cubin).decode("ascii"),
        "declarations": declarations,
        "declared": sorted({d.name for d in found if d.value is not None}),
        "warnings": warnings,
        "warning_count": warning_count,
        "shared": shared,
        "missing_tokens": _missing_tokens(program, payload.get("requires_text", [])),
    }


def _expands(program: Program, name: str) -> bool:
    """Whether `name` may be a macro at the end of the file (so NVRTC would expand it)."""
    return program.defined(name) != Live.DEAD


def _globals_problem(cubin: bytes, limit: int, probes: str | None = None) -> str | None:
    """A sentence when the module's global variables need more device memory than `limit`:
    loading the module allocates them all, used or not (an uninitialised `__device__` array
    has no bytes in the cubin, only a size). The grader's own probes (named with the prefix
    `probes`) are not the student's."""
    try:
        variables, total = global_variables(cubin)
    except CubinError:
        return None  # the kernel checks below say what is wrong with the cubin
    if probes:
        total -= sum(v.size for v in variables if v.name.startswith(probes))
        variables = [v for v in variables if not v.name.startswith(probes)]
    if total <= limit:
        return None
    largest = ", ".join(
        f"`{_symbol_name(v.name)}` ({_size(v.size)})" for v in variables[:3] if v.size
    )
    return (
        f"Your file's global variables (`__device__` arrays and variables) need {_size(total)} "
        f"of GPU memory; this lab allows {_size(limit)}"
        + (f" (the largest: {largest})" if largest else "")
        + ". The GPU is shared with other students' gradings: keep global arrays small, take "
        "the data from the kernel's parameters, and use shared memory for scratch space."
    )


def _symbol_name(symbol: str) -> str:
    base = demangled_base(symbol)
    return symbol if base == symbol else f"{base}` (C++ symbol `{symbol}"


def _size(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            value = size / (1 << shift)
            shown = f"{value:.0f}" if value >= 10 or value.is_integer() else f"{value:.1f}"
            return f"{shown} {unit}"
    return f"{size} bytes"


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.0f} MiB" if size >= 1 << 20 else f"{size} bytes"


def _missing_tokens(program: Program, tokens: list[str]) -> list[str]:
    if not tokens:
        return []
    bare = program.views.bare
    work.add(len(bare) * len(tokens))  # a literal search per token the lab requires
    return [t for t in tokens if not re.search(rf"(?<!\w){re.escape(t)}(?!\w)", bare)]


_MISSING_SEMICOLON = re.compile(r'^expected a ";"')


def error_sentence(log: str, filename: str, source: str) -> str:
    """One sentence about a failed compile: how many errors, and the first, with a hint where
    the compiler's words mislead (a missing `;` is reported on the next line)."""
    errors = count_errors(log, filename)
    first = first_error(log, filename)
    if first is None or errors == 0 or first[0] == NO_LINE:
        said = f" ({first[1]})" if first is not None and first[1] != "." else ""
        return (
            f"The compiler stopped with an error that names no line of your file{said}. This "
            "happens when code reaches a limit of the compiler or a construct it cannot "
            "translate; undo your most recent change or write that part more simply, and tell "
            "the course staff if a correct kernel gets this."
        )
    plural = "error" if errors == 1 else "errors"
    where, text = first
    lead = "it is" if errors == 1 else "the first is"
    sentence = f"The compiler reported {errors} {plural}; {lead} {where}: {text}"
    if where.startswith("on line ") and _MISSING_SEMICOLON.match(text):
        previous = _previous_code_line(source, int(where.removeprefix("on line ")))
        if previous is not None:
            sentence += (
                f" A missing `;` is reported where the next statement starts: check the end "
                f"of line {previous}."
            )
    if "Internal Compiler Error" in text:
        sentence += (
            " This is the compiler failing on the construct itself: write that part another "
            "way (for inline assembly, check the operand numbers and constraints)."
        )
    return sentence


def _previous_code_line(source: str, line: int) -> int | None:
    """The line where the last code before `line` ends, when that code does not end a
    statement (so a `;` may be missing there)."""
    views = SourceViews.of(source)
    last = None
    start = 0
    for logical in views.lines(views.code):
        if logical.number >= line:
            break
        text = logical.text.rstrip()
        if text.strip():
            last = (text, start + len(text) - 1)
        start += len(logical.text) + 1
    if last is None:
        return None
    text, end = last
    if text.endswith((";", "{", "}", ":", ",")) or text.lstrip().startswith(("#", "%:")):
        return None
    return views.line_at(end)


def _kernels(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Every kernel the lab names, in its order: name, C signature and parameter sizes."""
    return list(payload["kernels"])


def _check_kernel(kernel: dict[str, Any], names: list[str], cubin: bytes) -> tuple[str, str] | None:
    """The kernel exists as an `extern "C"` entry, with the parameter sizes the grader passes."""
    name: str = kernel["name"]
    expected: str = kernel["c_signature"]
    try:
        found = kernel_names(cubin)
    except CubinError as exc:
        return "internal", f"The compiler's output could not be read ({exc}); please resubmit."
    if name not in found:
        sentence = _missing_kernel_sentence(name, found, expected)
        if len(names) > 1:
            sentence += (
                f" This lab's file defines {len(names)} kernels: {', '.join(names)} (see the "
                "lab page for each one's signature)."
            )
        return "missing_kernel", sentence
    params = kernel_params(cubin, name)
    if params is None:  # an unknown table layout: leave the check to the run stage
        return None
    got = [p.size for p in params]
    want = list(kernel["signature_sizes"])
    if got != want:
        return (
            "wrong_signature",
            f"Your kernel `{name}` takes {len(got)} parameter"
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
        f"{demangled_base(n)} (C++ symbol {n})" if n.startswith("_Z") else n for n in found[:20]
    )
    return (
        f"No kernel named `{kernel}` was found; the file defines: {shown}. This lab expects "
        f"`{expected}`; rename your kernel or add it."
    )
