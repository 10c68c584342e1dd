"""Reading kernels and parameter sizes from a real cubin (compiled here with NVRTC)."""

from __future__ import annotations

import pytest

from graders.compile.cubin import (
    CubinError,
    demangled_base,
    global_variables,
    initial_values,
    kernel_names,
    kernel_params,
)

SOURCE = """\
__device__ __noinline__ float twice(float x) { return 2 * x; }
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float f) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = twice(src[i]) * f;
}
__global__ void cpp_kernel(double* a, long long n) { a[0] = n; }
"""


def compiled(source: str, arch: str = "sm_90") -> bytes:
    from cupy.cuda import nvrtc

    program = nvrtc.createProgram(source, "k.cu", [], [])
    try:
        nvrtc.compileProgram(program, [f"--gpu-architecture={arch}", "-std=c++17"])
        return bytes(nvrtc.getCUBIN(program))
    finally:
        nvrtc.destroyProgram(program)


@pytest.fixture(scope="module")
def cubin() -> bytes:
    return compiled(SOURCE)


def test_kernel_names_are_the_entries_only(cubin: bytes) -> None:
    names = kernel_names(cubin)
    assert sorted(names) == ["_Z10cpp_kernelPdx", "scale"]  # not the device function


def test_parameter_sizes_in_order(cubin: bytes) -> None:
    assert [p.size for p in kernel_params(cubin, "scale") or []] == [8, 8, 4, 4]
    assert [p.offset for p in kernel_params(cubin, "scale") or []] == [0, 8, 16, 20]
    assert [p.size for p in kernel_params(cubin, "_Z10cpp_kernelPdx") or []] == [8, 8]
    assert kernel_params(cubin, "absent") is None


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90"])
def test_parameter_sizes_on_every_architecture(arch: str) -> None:
    # sm_80's and sm_86's tables hold a record with no value, which still takes four bytes:
    # read as two, the rest of the table was misread and A100-class GPUs skipped the check.
    cubin = compiled(SOURCE, arch)
    assert [p.size for p in kernel_params(cubin, "scale") or []] == [8, 8, 4, 4]
    assert [p.size for p in kernel_params(cubin, "_Z10cpp_kernelPdx") or []] == [8, 8]


def test_not_a_cubin() -> None:
    with pytest.raises(CubinError):
        kernel_names(b"not an elf file at all, but long enough to have a header" * 2)


def test_demangled_base() -> None:
    assert demangled_base("_Z6matmulPKfS0_Pfiii") == "matmul"
    assert demangled_base("matmul") == "matmul"


GLOBALS = """\
__device__ float hoard[1ull << 36];
__device__ char unused[1 << 30];
__device__ int table[10] = {1, 2, 3};
__managed__ int counter;
namespace lib { __device__ double scratch[1000]; }
extern "C" __global__ void k(float* out, unsigned n) {
    static __device__ int local[256];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { hoard[i] = out[i]; local[i % 256] = i; }
    out[0] = table[n % 10] + counter + lib::scratch[n % 1000] + local[0];
}
"""


def test_global_variables_are_read_from_the_symbol_sizes() -> None:
    # Past 4 GiB the section's size and the symbols' offsets wrap around: the 256 GiB and the
    # 1 GiB array both start at one offset of a "1 GiB" section. Symbol sizes are 64-bit.
    cubin = compiled(GLOBALS)
    variables, total = global_variables(cubin)
    sizes = {demangled_base(v.name): v.size for v in variables}
    assert variables[0].name == "hoard" and variables[0].size == 1 << 38
    assert sizes["unused"] == 1 << 30  # never read, and still allocated when loaded
    assert sizes["table"] == 40 and sizes["counter"] == 4 and sizes["lib"] == 8000
    assert any(v.size == 1024 for v in variables)  # the kernel's static __device__ array
    assert total == sum(v.size for v in variables) > (1 << 38) + (1 << 30)
    assert len(cubin) < 64 * 1024  # none of it is in the file


def test_a_module_without_globals_has_none(cubin: bytes) -> None:
    assert global_variables(cubin) == ([], 0)


VALUES = """\
extern "C" __device__ const long long kgx_answer = -42;
extern "C" __device__ const int kgx_zero = 0;
extern "C" __device__ const int kgx_big[100] = {1};
extern "C" __device__ const int other = 7;
extern "C" __global__ void k(long long* out) {
    out[0] = kgx_answer + kgx_zero + kgx_big[0] + other;
}
"""


def test_initial_values_are_read_from_the_global_sections() -> None:
    # What the declared-value probes are read with: no GPU, the bytes the module is loaded with.
    cubin = compiled(VALUES)
    found = initial_values(cubin, "kgx_")
    assert found == {"kgx_answer": (-42).to_bytes(8, "little", signed=True), "kgx_zero": bytes(4)}
    assert set(initial_values(cubin, "kgx_", max_size=400)) == {"kgx_answer", "kgx_zero", "kgx_big"}
    assert initial_values(cubin, "nothing_") == {}
