"""Compile-stage attacks of issue 8: rules bypassed, the worker stalled, the grader blamed.

Each test submits what a student out to cheat or to break things would, through the worker's
entry (`compile_submission`, real NVRTC in the sandbox; no GPU needed). The parsers of student
text must run in the sandboxed compile child, never in this (the worker's) process:
`parsing_forbidden_here` stops a test at the first call into one of them here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import graders.compile
from graders.compile import compiler
from graders.compile.compiler import compile_submission
from graders.spec import LabSpec, load_builtin_lab
from tests.security.hostile import leaked_host_text

ARCH = "sm_90"
TILED_BODY = """\
{
    __shared__ float As[TILE_WIDTH][TILE_WIDTH];
    __shared__ float Bs[TILE_WIDTH][TILE_WIDTH];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE_WIDTH + ty, col = blockIdx.x * TILE_WIDTH + tx;
    float sum = 0.0f;
    for (int t = 0; t < (N + TILE_WIDTH - 1) / TILE_WIDTH; ++t) {
        As[ty][tx] = (row < M && t * TILE_WIDTH + tx < N) ? A[row * N + t * TILE_WIDTH + tx] : 0;
        Bs[ty][tx] = (col < K && t * TILE_WIDTH + ty < N) ? B[(t * TILE_WIDTH + ty) * K + col] : 0;
        __syncthreads();
        for (int k = 0; k < TILE_WIDTH; ++k) sum += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < K) C[row * K + col] = sum;
}
"""
SIGNATURE = (
    'extern "C" __global__ void matmul(const float* A, const float* B, float* C, '
    "int M, int N, int K)\n"
)
TILED = "#define TILE_WIDTH 16\n" + SIGNATURE + TILED_BODY
# Every module of the compile stage but the worker's side of it reads student text or bytes.
_PARSERS = {
    str(path.resolve())
    for path in Path(graders.compile.__file__).parent.glob("*.py")
    if path.name not in ("__init__.py", "compiler.py")
}


class ParsedInWorker(BaseException):
    """Student text was parsed in the worker's process (not an Exception: nothing catches it)."""


@contextlib.contextmanager
def parsing_forbidden_here() -> Iterator[None]:
    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename in _PARSERS:
            name = f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}"
            raise ParsedInWorker(f"{name} ran in the worker process, outside the sandbox")

    sys.setprofile(hook)
    try:
        yield
    finally:
        sys.setprofile(None)


def compile_in_worker(lab: LabSpec, source: str, **kwargs: Any) -> Any:
    with parsing_forbidden_here():
        return compile_submission(lab, source, arch=ARCH, **kwargs)


@pytest.fixture(scope="module")
def tiled_lab() -> LabSpec:
    return load_builtin_lab("matmul-tiled")


def assert_fit_to_show(text: str) -> None:
    assert len(text.encode()) <= 64 * 1024 + 200
    assert not any(c in text for c in "\x00\x07\x1b\x08\x7f")
    assert not leaked_host_text(text)
    for path in ("/tmp/", "/root/", "site-packages", "/work/"):
        assert path not in text, text[:2000]


# --- lab rules bypassed ------------------------------------------------------------------


def test_shared_inside_if_0_does_not_satisfy_the_shared_memory_rule(tiled_lab: LabSpec) -> None:
    naive = tiled_lab.reference("naive").source
    source = naive.replace("{\n", "{\n#if 0\n    __shared__ float unused[16][16];\n#endif\n", 1)
    result = compile_in_worker(tiled_lab, source)
    assert not result.ok and result.reason == "missing_requirement", result.message
    assert "uses none" in result.message and "`#if 0`" in result.message


def test_an_unused_shared_array_does_not_satisfy_it(tiled_lab: LabSpec) -> None:
    naive = tiled_lab.reference("naive").source
    source = naive.replace("{\n", "{\n    __shared__ float unused[16][16];\n", 1)
    result = compile_in_worker(tiled_lab, source)
    assert result.reason == "missing_requirement", result.message


def test_a_copy_of_the_naive_reference_fails_the_tiled_rule(tiled_lab: LabSpec) -> None:
    result = compile_in_worker(tiled_lab, tiled_lab.reference("naive").source)
    assert not result.ok and result.reason == "missing_requirement", result.message


def test_a_tiled_kernel_satisfies_it_from_the_cubin(tiled_lab: LabSpec) -> None:
    result = compile_in_worker(tiled_lab, TILED)
    assert result.ok, result.message
    assert result.uses_shared_memory and result.static_shared_bytes == 2 * 16 * 16 * 4


def test_dynamic_shared_memory_counts_where_the_lab_launches_with_some() -> None:
    lab = load_builtin_lab("array-sum")
    source = lab.reference("shared").source
    assert "extern __shared__" in source
    result = compile_in_worker(lab, source)
    assert result.ok and result.uses_shared_memory and result.static_shared_bytes == 0


@pytest.mark.parametrize(
    ("helper", "call"),
    [
        ("__device__ void load(float* s, const float* a, int i) {\n"
         "    s[threadIdx.x] = a[i];\n    __syncthreads();\n}\n", "load(s, src, i);"),
        ("#define SYNC __syncthreads()\n\n\n\n", "SYNC;"),
        ("#define SYNC() __syncthreads()\n\n\n\n", "SYNC();"),
    ],
    ids=["device-function", "object-like-macro", "function-like-macro"],
)  # fmt: skip
def test_a_barrier_in_a_helper_called_under_a_thread_condition_is_named(
    helper: str, call: str
) -> None:
    lab = load_builtin_lab("vector-scale")
    source = helper + (
        'extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, '
        "float factor)\n{\n"
        "    __shared__ float s[1024];\n"
        "    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) {\n"
        f"        {call}\n"
        "        dst[i] = s[threadIdx.x] * factor;\n"
        "    }\n"
        "}\n"
    )
    result = compile_in_worker(lab, source)
    assert result.ok, result.message
    (warning,) = result.warnings
    # Line 10 holds the call, line 3 (helper) or 1 (macro) the barrier, line 9 the condition.
    barrier_line = 3 if "__device__" in helper else 1
    assert warning.startswith("Line 10: `"), warning
    assert f"reaches `__syncthreads()` on line {barrier_line})" in warning
    assert "is inside `if (i < n)` on line 9" in warning and "the barrier problem" in warning


# --- the worker stalled ------------------------------------------------------------------


def _tiled_with(prefix: str = "", body_prefix: str = "") -> str:
    body = TILED_BODY.replace("{\n", "{\n" + body_prefix, 1)
    return prefix + "#define TILE_WIDTH 16\n" + SIGNATURE + body


def test_nested_do_while_loops_are_read_in_the_child_in_linear_time(tiled_lab: LabSpec) -> None:
    # The barrier check walked each do-body twice: 2^40 steps, in the worker, with no limit.
    depth = 40
    loops = "    do {\n" * depth + "    __syncthreads();\n" + "    } while (K < 0);\n" * depth
    result = compile_in_worker(tiled_lab, _tiled_with(body_prefix=loops))
    assert result.ok, result.message
    assert compile_in_worker(tiled_lab, TILED).ok  # and the next submission compiles as usual


def test_a_define_and_a_long_run_of_blanks_is_read_in_the_child(tiled_lab: LabSpec) -> None:
    # `#define TILE 1` and 200 000 blanks: a quadratic regular expression, minutes of CPU.
    source = TILED.replace("#define TILE_WIDTH 16", "#define TILE_WIDTH 16" + " " * 200_000 + "+0")
    result = compile_in_worker(tiled_lab, source)
    assert result.ok and result.declarations == {"TILE": 16}, result.message
    assert compile_in_worker(tiled_lab, TILED).ok


def test_a_comma_chain_and_a_backwards_chain_are_read_in_the_child(tiled_lab: LabSpec) -> None:
    names = [f"v{i}" for i in range(500)]
    chain = "".join(f"    {names[i]} = {names[i - 1]};\n" for i in range(len(names) - 1, 0, -1))
    body = (
        f"    int {', '.join(names)};\n{chain}    v0 = threadIdx.x;\n    int w = 0;\n"
        "    w = 1" + ", w = w" * 2_000 + ";\n    (void)w; (void)v499;\n"
    )
    result = compile_in_worker(tiled_lab, _tiled_with(body_prefix=body))
    assert result.ok, result.message


# --- the grader blamed itself ------------------------------------------------------------


def test_a_pragma_message_that_is_not_utf8_gets_a_verdict(tiled_lab: LabSpec) -> None:
    source = '#pragma message("bad byte: \\xff, escape: \\x1b[31m, bell: \\x07")\n' + TILED
    result = compile_in_worker(tiled_lab, source)
    assert result.ok and result.reason == "", result.message
    assert "bad byte: \ufffd" in result.log
    assert_fit_to_show(result.log)


def test_a_52_mib_device_array_is_a_verdict_with_the_limit() -> None:
    lab = load_builtin_lab("vector-scale")
    source = (
        "__device__ char table[52 << 20] = {1};\n"
        'extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, '
        "float factor)\n{\n"
        "    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) dst[i] = src[i] * factor + table[i % (52 << 20)];\n}\n"
    )
    result = compile_in_worker(lab, source)
    assert not result.ok and result.reason == "resource_limit", result.message
    assert result.message.startswith("The compiled kernel is 52 MiB; the limit is 16 MiB.")


def test_a_compiler_that_crashes_on_a_file_twice_gives_the_file_a_verdict(
    tiled_lab: LabSpec, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # NVRTC aborting on a file (`malloc(): invalid size` on huge template instantiations)
    # was status `error`, "a problem on our side ... submit the same file again".
    monkeypatch.setattr(compiler, "COMPILE_TARGET", "tests.graders.compile.crash_targets:abort")
    with caplog.at_level(logging.WARNING, logger="graders.compile.compiler"):
        result = compile_in_worker(tiled_lab, TILED)
    assert result.reason == "resource_limit", result.message
    assert result.message.startswith(
        "The compiler crashed on this file (killed by SIGABRT) each time it was tried, so it "
        "could not be compiled."
    )
    assert "not your fault" not in result.message and "resubmit" not in result.message
    assert caplog.text.count("crashed on attempt") == compiler.COMPILE_ATTEMPTS == 2


def test_a_crash_that_does_not_come_again_is_not_the_files(
    tiled_lab: LabSpec, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    target = "tests.graders.compile.crash_targets:abort_on_the_first_attempt"
    monkeypatch.setattr(compiler, "COMPILE_TARGET", target)
    with caplog.at_level(logging.WARNING, logger="graders.compile.compiler"):
        result = compile_in_worker(tiled_lab, TILED)
    assert result.ok and result.declarations == {"TILE": 16}, result.message
    assert caplog.text.count("crashed on attempt 1 of 2") == 1


def test_a_failure_of_the_grader_itself_stays_the_graders(
    tiled_lab: LabSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An exception in the grader's own code is no compiler crash: not retried, not the file's.
    target = "graders.sandbox.selftest_targets:raise_error"
    monkeypatch.setattr(compiler, "COMPILE_TARGET", target)
    result = compile_in_worker(tiled_lab, TILED)
    assert result.reason == "internal" and "not your fault" in result.message


def test_global_variables_are_held_to_the_labs_device_memory_limit() -> None:
    # A 48 GiB uninitialised `__device__` array loaded and passed every case, leaving the
    # other gradings on the card 30 GiB. Its bytes are not in the cubin, only its size.
    lab = load_builtin_lab("vector-scale")
    source = (
        "__device__ float hoard[3ull << 32];\n"
        'extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, '
        "float factor)\n{\n"
        "    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) { hoard[i] = src[i]; dst[i] = hoard[i] * factor; }\n}\n"
    )
    result = compile_in_worker(lab, source)
    assert result.reason == "resource_limit" and result.cubin is None, result.message
    assert result.message.startswith(
        "Your file's global variables (`__device__` arrays and variables) need 48 GiB of GPU "
        "memory; this lab allows 1 GiB (the largest: `hoard` (48 GiB))."
    )

    # The limit is the lab's: 256 MiB refuses an array of 300 MiB, 64 GiB lets 48 GiB pass.
    def limited(megabytes: int) -> LabSpec:
        limits = dataclasses.replace(lab.limits, device_globals_mb=megabytes)
        return dataclasses.replace(lab, limits=limits)

    small = source.replace("3ull << 32", "75 << 20")
    result = compile_in_worker(limited(256), small)
    assert result.reason == "resource_limit" and "need 300 MiB" in result.message
    assert "allows 256 MiB" in result.message
    assert compile_in_worker(lab, small).ok
    assert compile_in_worker(limited(65536), source).ok


def test_an_error_nvrtc_reports_without_the_usual_shape_is_named(tiled_lab: LabSpec) -> None:
    # NVVM writes `Error:` with a capital: the grader counted 0 errors.
    source = (
        "struct Big { char bytes[40000]; };\n"
        'extern "C" __global__ void matmul(Big big, float* C) { C[0] = big.bytes[0]; }\n'
    )
    result = compile_in_worker(tiled_lab, source)
    assert result.reason == "compile_error", result.message
    assert "0 errors" not in result.message
    assert result.message.startswith("The compiler reported 1 error; it is on line 2: Formal ")


def test_an_error_in_inline_assembly_is_named(tiled_lab: LabSpec) -> None:
    source = TILED.replace("float sum = 0.0f;", 'float sum = 0.0f; asm volatile("foo.bar;");')
    result = compile_in_worker(tiled_lab, source)
    assert result.reason == "compile_error"
    assert "in the inline assembly (PTX): Unknown modifier '.bar'." in result.message


# --- what students see -------------------------------------------------------------------


@pytest.mark.parametrize("literal", ["X'/*'", "u8R'/*'", "x1'/*'"])
def test_a_character_literal_after_a_name_cannot_hide_a_line_directive(
    tiled_lab: LabSpec, literal: str
) -> None:
    # `X'/*'` is the name X and a character literal to NVRTC; read as a digit separator and a
    # comment, it hid the `#line` after it, and the log then showed no error at all.
    source = "#define X\n#define u8R\n#define x1\n" + TILED.replace(
        "float sum = 0.0f;", f"float sum = 0.0f; int c = {literal}; (void)c;"
    ).replace(
        "if (row < M && col < K)", '#line 1 "/etc/passwd"\n    if (row < M && col < K)'
    ).replace("C[row * K + col] = sum;", "C[row * K + col] = total; // */")
    result = compile_in_worker(tiled_lab, source)
    assert result.reason == "compile_error", result.message
    assert result.message.startswith("The compiler reported 1 error; it is on line 20:")
    assert 'submission.cu(20): error: identifier "total" is undefined' in result.log
    assert "passwd" not in result.log


def test_messages_and_logs_are_capped_and_clean(tiled_lab: LabSpec) -> None:
    # A small file whose log is long and full of control characters and foreign bytes.
    noise = '#pragma message("\\x1b[2J\\x07\\x08\\xfe /root/.venv/lib/site-packages/x.py")\n'
    source = noise * 300 + TILED.replace("float sum = 0.0f;", "float sum = zero;")
    result = compile_in_worker(tiled_lab, source)
    assert result.reason == "compile_error"
    for text in (result.message, result.log, *result.warnings):
        assert_fit_to_show(text)


def test_the_childs_own_output_goes_to_the_worker_log(
    tiled_lab: LabSpec, caplog: pytest.LogCaptureFixture
) -> None:
    from graders.compile.compiler import result_from_outcome
    from graders.sandbox.runner import SandboxLimits, run_sandboxed

    limits = SandboxLimits(wall_seconds=30, cpu_seconds=30, memory_mb=None)
    outcome = run_sandboxed("graders.sandbox.selftest_targets:warn_then_raise", {}, limits=limits)
    with caplog.at_level(logging.DEBUG, logger="graders.compile.compiler"):
        result = result_from_outcome(
            tiled_lab, outcome, arch=ARCH, limits=limits, started=time.perf_counter()
        )
    assert result.reason == "internal"
    shown = f"{result.message}\n{result.log}\n{result.warnings}"
    assert "Traceback" not in shown and "Warning" not in shown and "selftest" not in shown
    assert_fit_to_show(shown)
    logged = caplog.text
    assert "Traceback" in logged and "selftest_targets.py" in logged
    assert "UserWarning: a warning of the child's own" in logged


# --- legitimate files read as the compiler reads them (issue 17) -------------------------


def _kernel_file(name: str) -> str:
    return (Path(__file__).parent / "kernels" / name).read_bytes().decode("utf-8")


def test_the_tile_width_of_the_branch_the_compiler_takes_is_launched(tiled_lab: LabSpec) -> None:
    # The grader read 32 from `#if 0`, the compiler used 16: "illegal address" on the GPU.
    result = compile_in_worker(tiled_lab, _kernel_file("tile_width_in_dead_branch.cu"))
    assert result.ok and result.declarations == {"TILE": 16}, result.message
    assert result.static_shared_bytes == 2 * 16 * 16 * 4
    assert result.message == "Compiled for sm_90 (TILE = 16)."


def test_a_tile_width_taken_from_the_launch_gets_the_default_and_a_note(
    tiled_lab: LabSpec,
) -> None:
    result = compile_in_worker(tiled_lab, _kernel_file("tile_width_from_the_launch.cu"))
    assert result.ok and result.declarations == {"TILE": 32}, result.message
    (note,) = result.warnings
    assert note.startswith("Line 11: TILE is set to `blockDim.x`, which is not a whole-number")
    assert "launches the kernel with this lab's default TILE = 32" in note
    assert result.message == "Compiled for sm_90 with 1 warning."


def test_a_line_the_scanner_calls_a_comment_is_refused_when_the_compiler_reads_it() -> None:
    # Under C++11 `1'0` is no number: `'0; /* '` is a character literal, and the next line is
    # a live #include. The views (C++14 rules) call it a comment; the line NVRTC compiles is
    # `#error "/etc/passwd"`, so NVRTC stops there, never opening the file, and it is refused.
    lab = load_builtin_lab("vector-scale")
    lab = dataclasses.replace(lab, nvrtc_options=["-std=c++11"])
    source = (
        'extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, '
        "float factor)\n{\n"
        "    int quirk = 1'0; /* '\n"
        '#include "/etc/passwd"\n'
        "    */;\n"
        "    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) dst[i] = src[i] * factor + 0 * quirk;\n}\n"
    )
    result = compile_in_worker(lab, source)
    assert result.reason == "forbidden_include", (result.message, result.log)
    assert result.message.startswith('Line 4 includes ".../passwd", which the grader does not')
    assert not leaked_host_text(f"{result.message}\n{result.log}")
    # Under C++17 (the default) the compiler agrees that it is a comment: the file compiles.
    assert compile_in_worker(load_builtin_lab("vector-scale"), source).ok


def test_trigraphs_are_refused_only_where_the_standard_reads_them() -> None:
    lab = load_builtin_lab("vector-scale")
    source = _kernel_file("trigraph_in_comment.cu")
    assert compile_in_worker(lab, source).ok
    cxx14 = dataclasses.replace(lab, nvrtc_options=["-std=c++14"])
    result = compile_in_worker(cxx14, source)
    assert result.reason == "forbidden_include" and "trigraph `??)`" in result.message


def test_a_pragma_message_flood_keeps_what_the_grader_reads_from_the_log(
    tiled_lab: LabSpec,
) -> None:
    # ptxas's shared-memory lines come after a megabyte of pragma text: cut off, the tiled
    # kernel read as using dynamic shared memory only (`no_dynamic_shared_memory`).
    chain = "".join(f"#define S{i} S{i - 1} S{i - 1}\n" for i in range(1, 17))
    flood = '#define S0 "flood flood floo"\n' + chain + "#pragma message(S16)\n"
    result = compile_in_worker(tiled_lab, flood + TILED)
    assert result.ok, result.message
    assert result.static_shared_bytes == 2 * 16 * 16 * 4
    assert len(result.log) < 30_000 and "this message was cut" in result.log
