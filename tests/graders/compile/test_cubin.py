"""Reading kernels and parameter sizes from a real cubin (compiled here with NVRTC)."""

from __future__ import annotations

import pytest

from graders.compile.cubin import CubinError, demangled_base, kernel_names, kernel_params

SOURCE = """\
__device__ __noinline__ float twice(float x) { return 2 * x; }
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float f) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = twice(src[i]) * f;
}
__global__ void cpp_kernel(double* a, long long n) { a[0] = n; }
"""


@pytest.fixture(scope="module")
def cubin() -> bytes:
    from cupy.cuda import nvrtc

    program = nvrtc.createProgram(SOURCE, "k.cu", [], [])
    try:
        nvrtc.compileProgram(program, ["--gpu-architecture=sm_90", "-std=c++17"])
        return bytes(nvrtc.getCUBIN(program))
    finally:
        nvrtc.destroyProgram(program)


def test_kernel_names_are_the_entries_only(cubin: bytes) -> None:
    names = kernel_names(cubin)
    assert sorted(names) == ["_Z10cpp_kernelPdx", "scale"]  # not the device function


def test_parameter_sizes_in_order(cubin: bytes) -> None:
    assert [p.size for p in kernel_params(cubin, "scale") or []] == [8, 8, 4, 4]
    assert [p.offset for p in kernel_params(cubin, "scale") or []] == [0, 8, 16, 20]
    assert [p.size for p in kernel_params(cubin, "_Z10cpp_kernelPdx") or []] == [8, 8]
    assert kernel_params(cubin, "absent") is None


def test_not_a_cubin() -> None:
    with pytest.raises(CubinError):
        kernel_names(b"not an elf file at all, but long enough to have a header" * 2)


def test_demangled_base() -> None:
    assert demangled_base("_Z6matmulPKfS0_Pfiii") == "matmul"
    assert demangled_base("matmul") == "matmul"
