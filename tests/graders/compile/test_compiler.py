"""compile_submission: real NVRTC in the sandbox (no GPU needed), one test per outcome."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from graders.compile.compiler import (
    compile_submission,
    default_arch,
    safe_filename,
)
from graders.compile.log import clean_log
from graders.compile.pipeline import nvrtc_compile
from graders.spec import LabSpec, LimitsSpec, load_builtin_lab, load_lab
from tests.graders.spec_samples import GOOD_SPEC, NAIVE, write_lab

ARCH = "sm_90"

TILED = """\
// A correct tiled kernel: bounds checks guard the loads and the store; the barriers are
// reached by every thread.
#define TILE_WIDTH 16

extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[TILE_WIDTH][TILE_WIDTH];
    __shared__ float Bs[TILE_WIDTH][TILE_WIDTH];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE_WIDTH + ty;
    int col = blockIdx.x * TILE_WIDTH + tx;
    float sum = 0.0f;
    for (int t = 0; t < (N + TILE_WIDTH - 1) / TILE_WIDTH; ++t) {
        int a = t * TILE_WIDTH + tx, b = t * TILE_WIDTH + ty;
        As[ty][tx] = (row < M && a < N) ? A[row * N + a] : 0.0f;
        Bs[ty][tx] = (col < K && b < N) ? B[b * K + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE_WIDTH; ++k)
            sum += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < K)
        C[row * K + col] = sum;
}
"""

PASSWD_LINES = [
    line for line in Path("/etc/passwd").read_text().splitlines() if len(line) > 8
] if Path("/etc/passwd").is_file() else []  # fmt: skip


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> LabSpec:
    return load_lab(write_lab(tmp_path_factory.mktemp("labs"), GOOD_SPEC))


def test_good_kernel_compiles_to_a_cubin(lab: LabSpec) -> None:
    result = compile_submission(lab, TILED, arch=ARCH)
    assert result.ok, result.message + result.log
    assert result.reason == "" and result.message == "Compiled for sm_90 (TILE = 16)."
    assert result.cubin is not None and result.cubin[:4] == b"\x7fELF"
    assert result.declarations == {"TILE": 16}
    assert result.warnings == [] and result.kernel == "matmul" and result.arch == ARCH
    assert "cubin" not in result.to_dict()


def test_line_info_build_compiles(lab: LabSpec) -> None:
    assert compile_submission(lab, TILED, arch=ARCH, line_info=True).ok


def test_compile_error_points_into_the_students_file(lab: LabSpec) -> None:
    broken = TILED.replace("float sum = 0.0f;", "float sum = zero;").replace(
        "C[row * K + col] = sum;", "C[row * K + col] = total;"
    )
    result = compile_submission(lab, broken, arch=ARCH, filename="../../my kernel.cu")
    assert not result.ok and result.reason == "compile_error"
    assert result.cubin is None
    # The file name is a plain default when the upload's name is not plain.
    assert 'submission.cu(12): error: identifier "zero" is undefined' in result.log
    result = compile_submission(lab, broken, arch=ARCH, filename="lab14_tiled.cu")
    assert 'lab14_tiled.cu(23): error: identifier "total" is undefined' in result.log
    assert result.message == (
        'The compiler reported 2 errors; the first is on line 12: identifier "zero" is undefined.'
    )
    assert 'detected in the compilation of "lab14_tiled.cu"' in result.log


def test_wrong_kernel_name_names_both(lab: LabSpec) -> None:
    source = TILED.replace("void matmul(", "void matmul_tiled(")
    result = compile_submission(lab, source, arch=ARCH)
    assert not result.ok and result.reason == "missing_kernel"
    assert "`matmul`" in result.message and "matmul_tiled" in result.message
    assert 'extern "C" __global__ void matmul(const float* A' in result.message


def test_missing_extern_c_is_hinted(lab: LabSpec) -> None:
    result = compile_submission(lab, TILED.replace('extern "C" ', ""), arch=ARCH)
    assert not result.ok and result.reason == "missing_kernel"
    assert 'declare it `extern "C"`' in result.message and "_Z6matmul" in result.message


def test_no_kernel_at_all(lab: LabSpec) -> None:
    result = compile_submission(lab, "__device__ float twice(float x) { return 2 * x; }\n")
    assert result.reason == "missing_kernel"
    assert "defines no __global__ function" in result.message


def test_parameters_in_another_order_are_refused(lab: LabSpec) -> None:
    # Seed 004's kernel takes (m, n, k, A, B, C); the grader passes (A, B, C, M, N, K).
    source = (
        'extern "C" __global__ void matmul(int M, int N, int K, const float* A, '
        "const float* B, float* C) { __shared__ float s[1]; if (M) C[0] = A[0] + B[0] + s[0]; }\n"
    )
    result = compile_submission(lab, source, arch=ARCH)
    assert not result.ok and result.reason == "wrong_signature"
    assert "4, 4, 4, 8, 8, 8 bytes" in result.message and "8, 8, 8, 4, 4, 4 bytes" in result.message


@pytest.mark.parametrize(
    "include",
    [
        '#include "/etc/passwd"',
        '#include "../../../../../../etc/passwd"',
        # A carriage return is a space to NVRTC: this opened the file past every check.
        '\r#include "/etc/passwd"',
    ],
)
def test_host_file_includes_are_refused_before_compiling(lab: LabSpec, include: str) -> None:
    result = compile_submission(lab, f"{include}\n{TILED}", arch=ARCH)
    assert not result.ok and result.reason == "forbidden_include"
    # The path is the student's own text, but no message shows a host path: `.../passwd`.
    assert result.message.startswith("Line 1 includes") and '/passwd"' in result.message
    text = result.message + result.log
    assert not any(line in text for line in PASSWD_LINES)


def test_builtin_headers_are_served_from_memory(lab: LabSpec) -> None:
    source = "#include <cuda_runtime.h>\n#include <stdio.h>\n#include <cstdint>\n" + TILED.replace(
        "int tx = threadIdx.x", "uint32_t unused = 0; (void)unused;\n    int tx = threadIdx.x"
    )
    result = compile_submission(lab, source, arch=ARCH)
    assert result.ok, result.message + result.log


def test_the_log_never_carries_another_files_text() -> None:
    # What NVRTC printed before the include policy existed, for `#include "/etc/passwd"`.
    raw = (
        "/etc/passwd(1): error: this declaration has no storage class or type specifier\n"
        "  root:x:0:0:root:/root:/bin/bash\n  ^\n\n"
        'submission.cu(3): error: identifier "x" is undefined\n  secret text echoed\n  ^\n\n'
        'submission.cu(4): error: expected a ";"\n  float y = 1\n            ^\n\n'
        '3 errors detected in the compilation of "submission.cu".\n'
    )
    source = "a\nb\nc\n  float y = 1\n"
    log = clean_log(raw, "submission.cu", source)
    assert "root:x:0:0" not in log and "secret text echoed" not in log
    assert "(a message about a file other than yours was left out)" in log
    assert "float y = 1" in log and "submission.cu(4)" in log


def test_preprocessor_bomb_stops_at_the_wall_clock_limit(lab: LabSpec) -> None:
    doubling = [f"#define A{i} A{i - 1} A{i - 1}" for i in range(1, 31)]
    source = "\n".join(["#define A0 x", *doubling, "int v = sizeof(A30);", TILED])
    result = compile_submission(lab, source, arch=ARCH, timeout_s=1.5)
    assert not result.ok and result.reason == "timeout"
    assert result.message.startswith("The compiler was stopped after 1.5 s")


def test_expansion_bomb_stops_at_the_memory_limit(lab: LabSpec) -> None:
    small = dataclasses.replace(lab, limits=LimitsSpec(20, 10, 1024))
    source = (
        "#define X(a) a+a+a+a+a+a+a+a+a+a\n"
        "__device__ int v = X(X(X(X(X(X(X(X(X(1)))))))));\n" + TILED
    )
    result = compile_submission(small, source, arch=ARCH)
    assert not result.ok and result.reason == "resource_limit", result.message
    assert "1024 MiB" in result.message


def test_declaration_out_of_bounds_is_refused(lab: LabSpec) -> None:
    result = compile_submission(lab, TILED.replace("TILE_WIDTH 16", "TILE_WIDTH 64"), arch=ARCH)
    assert not result.ok and result.reason == "bad_declaration"
    assert result.message == (
        "Line 3 sets TILE_WIDTH to 64, but this lab accepts TILE from 1 to 32; change it and "
        "resubmit."
    )


def test_a_declaration_must_meet_the_labs_constraints(lab: LabSpec) -> None:
    tile = dataclasses.replace(lab.declares["TILE"], power_of_two=True)
    strict = dataclasses.replace(lab, declares={"TILE": tile})
    result = compile_submission(strict, TILED.replace("TILE_WIDTH 16", "TILE_WIDTH 12"), arch=ARCH)
    assert not result.ok and result.reason == "bad_declaration"
    assert "TILE must be a power of two" in result.message
    assert compile_submission(strict, TILED, arch=ARCH).ok


def test_every_kernel_of_a_lab_with_several_is_looked_for() -> None:
    lab = load_builtin_lab("prefix-sum")
    source = lab.reference("shuffle").source
    assert compile_submission(lab, source, arch=ARCH).ok
    # Without the third kernel (renamed), and with the second's parameters in another type.
    renamed = source.replace("void add_block_offsets(", "void add_offsets(")
    result = compile_submission(lab, renamed, arch=ARCH)
    assert not result.ok and result.reason == "missing_kernel"
    assert result.message.startswith("No kernel named `add_block_offsets` was found")
    assert "defines 3 kernels: scan_blocks, scan_block_sums, add_block_offsets" in result.message
    wrong = source.replace(
        "scan_block_sums(int* block_sums, unsigned int nblocks)",
        "scan_block_sums(int* block_sums, unsigned long long nblocks)",
    )
    assert wrong != source
    result = compile_submission(lab, wrong, arch=ARCH)
    assert not result.ok and result.reason == "wrong_signature"
    assert "`scan_block_sums` takes 2 parameters of 8, 8 bytes" in result.message


def test_octal_declaration_is_read_as_c_reads_it(lab: LabSpec) -> None:
    # `010` is 8 in C; Python's int("010", 0) raised, and the student got "the grader failed".
    result = compile_submission(lab, TILED.replace("TILE_WIDTH 16", "TILE_WIDTH 010"), arch=ARCH)
    assert result.ok and result.reason == "", result.message
    assert result.declarations == {"TILE": 8}


def copied_source(lab: LabSpec) -> str:
    return lab.reference("naive").source


def test_missing_requirement_is_refused_even_for_a_copy_of_a_reference(lab: LabSpec) -> None:
    naive = NAIVE.replace("{}", "{ if (M && N && K) C[0] = A[0] * B[0]; }")
    result = compile_submission(lab, naive, arch=ARCH)
    assert not result.ok and result.reason == "missing_requirement"
    assert "`__shared__`" in result.message and "uses none" in result.message
    # A student's copy of the lab's naive reference breaks the rule like any other file; the
    # references themselves are compiled without `requires` (graders.grade.compile_reference).
    copied = compile_submission(lab, copied_source(lab), arch=ARCH)
    assert not copied.ok and copied.reason == "missing_requirement"
    assert compile_submission(dataclasses.replace(lab, requires=[]), copied_source(lab)).ok


def test_divergent_barrier_becomes_a_warning_with_its_line(lab: LabSpec) -> None:
    source = TILED.replace(
        "    for (int t = 0;", "    if (row < M && col < K)\n    for (int t = 0;"
    )
    result = compile_submission(lab, source, arch=ARCH)
    assert result.ok and result.message == "Compiled for sm_90 (TILE = 16) with 2 warnings."
    assert [w.split(":")[0] for w in result.warnings] == ["Line 18", "Line 21"]
    assert "row < M && col < K" in result.warnings[0]


def test_arch_default_and_filenames() -> None:
    assert default_arch().startswith("sm_")
    assert safe_filename("/home/x/../lab.cu") == "lab.cu"
    assert safe_filename("a b.cu") == "submission.cu" and safe_filename("") == "submission.cu"


def test_line_directives_cannot_rename_the_file_or_move_lines(lab: LabSpec) -> None:
    source = '#line 500 "/etc/passwd"\n' + TILED.replace("float sum = 0.0f;", "float sum = zero;")
    result = compile_submission(lab, source, arch=ARCH)
    assert result.reason == "compile_error"
    assert 'submission.cu(13): error: identifier "zero" is undefined' in result.log
    assert "/etc/passwd" not in result.log and "(500)" not in result.log


def test_assembler_errors_are_compile_errors(lab: LabSpec) -> None:
    source = TILED.replace("As[TILE_WIDTH][TILE_WIDTH];", "As[TILE_WIDTH][TILE_WIDTH * 1024];")
    result = compile_submission(lab, source, arch=ARCH)
    assert not result.ok and result.reason == "compile_error"
    assert result.message.startswith(
        "The compiler reported 1 error; it is when the kernel was assembled: Entry function "
        "'matmul' uses too much shared data ("
    )
    assert "max)" in result.message and "0x" not in result.message


def test_log_cleaning_alone_stops_a_real_leak(lab: LabSpec) -> None:
    # Defence in depth: if the include policy ever missed a spelling, NVRTC would print the
    # file; the cleaned log still must not carry any of it.
    if not PASSWD_LINES:
        pytest.skip("this machine has no /etc/passwd to leak")
    source = '#include "/etc/passwd"\n' + TILED
    ok, _, raw_log, _ = nvrtc_compile(source, "submission.cu", ["--gpu-architecture=sm_90"], {})
    assert not ok
    leaked = [line for line in PASSWD_LINES if line in raw_log]
    assert leaked, "NVRTC no longer prints included files; this test shows nothing"
    cleaned = clean_log(raw_log, "submission.cu", source)
    assert not any(line in cleaned for line in PASSWD_LINES)
    assert "(a message about a file other than yours was left out)" in cleaned


def test_form_feeds_cannot_shape_a_kept_line() -> None:
    # str.splitlines() would split "a\f\fb" into "a", "", "b": an empty "line" that ends the
    # other file's block, after which "secret" would read as the compiler's own text.
    raw = (
        "/etc/x(1): error: bad\n  root\x0c\x0csecret\n  ^\n\nsubmission.cu(2): error: y\n  int a\n"
    )
    log = clean_log(raw, "submission.cu", "q\nint a\n")
    assert "secret" not in log and "root" not in log and "int a" in log


def test_the_builtin_headers_define_what_students_use(lab: LabSpec) -> None:
    uses = """\
#include <math.h> // for INFINITY
#include <cmath>
#include <cfloat>   /* FLT_MAX */
#include <climits>
#include <cstdint>
#define INT_MAX 2147483647
constexpr float lowest = -INFINITY;
__device__ double limits[] = {FLT_MAX, DBL_MAX, FLT_EPSILON, HUGE_VAL, M_PI, (double)INT_MAX,
                              (double)UINT32_MAX, (double)LLONG_MAX, (double)SIZE_MAX};
"""
    source = uses + TILED.replace(
        "float sum = 0.0f;", "float sum = (isnan(NAN) && lowest < 0) ? 0.0f : limits[0];"
    )
    result = compile_submission(lab, source, arch=ARCH)
    assert result.ok, result.message + result.log
    assert "warning" not in result.log, result.log


def test_a_missing_semicolon_names_the_line_before(lab: LabSpec) -> None:
    source = TILED.replace("float sum = 0.0f;", "float sum = 0.0f\n    // the loop\n")
    result = compile_submission(lab, source, arch=ARCH)
    assert result.reason == "compile_error"
    assert result.message == (
        'The compiler reported 1 error; it is on line 15: expected a ";". A missing `;` is '
        "reported where the next statement starts: check the end of line 12."
    )


def test_dynamic_shared_memory_where_the_lab_gives_none_is_named(lab: LabSpec) -> None:
    source = TILED.replace(
        "__shared__ float As[TILE_WIDTH][TILE_WIDTH];\n"
        "    __shared__ float Bs[TILE_WIDTH][TILE_WIDTH];",
        "extern __shared__ float tiles[];\n"
        "    float (*As)[TILE_WIDTH] = (float (*)[TILE_WIDTH]) tiles;\n"
        "    float (*Bs)[TILE_WIDTH] = (float (*)[TILE_WIDTH]) (tiles + TILE_WIDTH * TILE_WIDTH);",
    )
    assert "extern __shared__" in source
    result = compile_submission(lab, source, arch=ARCH)
    assert not result.ok and result.reason == "no_dynamic_shared_memory", result.message
    assert "launches it with none" in result.message and "__shared__ float tile[" in result.message


def test_a_near_miss_tile_width_is_a_warning_that_names_the_spelling(lab: LabSpec) -> None:
    source = TILED.replace(
        "#define TILE_WIDTH 16", "#define Tile_Width 16\n#define TILE_WIDTH Tile_Width"
    )
    result = compile_submission(lab, source, arch=ARCH)
    # TILE_WIDTH is read through the macro it names, as the preprocessor reads it.
    assert result.ok and result.declarations == {"TILE": 16}, result.message
    assert result.message == "Compiled for sm_90 (TILE = 16)."
    source = TILED.replace("TILE_WIDTH", "tileWidth")
    result = compile_submission(lab, source, arch=ARCH)
    assert result.ok and result.declarations == {"TILE": 32}
    assert result.message == "Compiled for sm_90 with 1 warning."
    (warning,) = result.warnings
    assert warning.startswith("Line 3: `tileWidth` = 16 is not read by the grader")
    assert "Rename `tileWidth` to `TILE_WIDTH`" in warning
