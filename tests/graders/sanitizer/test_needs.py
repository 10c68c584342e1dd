"""Which of compute-sanitizer's tools a submission gets, decided from the cubin NVRTC made of it
(graders.sanitizer.needs, graders.compile.cubin_info): real cubins, no GPU."""

from __future__ import annotations

import pytest

from graders.compile.cubin_info import sync_facts
from graders.sanitizer.needs import tools_needed

nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc")

ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90")

PLAIN = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] *= 2.0f; }'
SHARED = """
extern "C" __global__ void k(float* a) {
    __shared__ float t[64];
    t[threadIdx.x] = a[threadIdx.x];
    a[threadIdx.x] = t[63 - threadIdx.x];  // no barrier: a race racecheck would name
}
"""
DYNAMIC_SHARED = """
extern "C" __global__ void k(float* a) {
    extern __shared__ float t[];
    t[threadIdx.x] = a[threadIdx.x];
    a[threadIdx.x] = t[0];
}
"""
BARRIER = """
extern "C" __global__ void k(float* a) {
    float v = a[threadIdx.x];
    if (threadIdx.x < 16) __syncthreads();  // a barrier in divergent code, no shared memory
    a[threadIdx.x] = v * 2.0f;
}
"""
TILED = """
#define TILE 16
extern "C" __global__ void k(const float* a, float* c, int n) {
    __shared__ float tile[TILE][TILE];
    int r = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < n; t += TILE) {
        tile[threadIdx.y][threadIdx.x] = a[r * n + t + threadIdx.x];
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += tile[threadIdx.y][k];
        __syncthreads();
    }
    c[r * n + col] = acc;
}
"""
SHUFFLE = """
extern "C" __global__ void k(float* a) {
    float v = a[threadIdx.x];
    v += __shfl_down_sync(0xffffffffu, v, 1);
    a[threadIdx.x] = v;
}
"""
VOTE = """
extern "C" __global__ void k(unsigned* a) {
    a[threadIdx.x] = __ballot_sync(0xffffffffu, a[threadIdx.x] > 0u);
}
"""
HELPER = """
__device__ __noinline__ void stage(float* a) { __syncthreads(); a[0] = 1.0f; }
extern "C" __global__ void k(float* a) { stage(a); }
"""
# Words in the source that the compiled program does not have.
ONLY_WORDS = """
// __syncthreads(); __shared__ float t[64];
#if 0
__shared__ float never[64];
#endif
extern "C" __global__ void k(float* a) {
    __shared__ float unused[64];  // never touched: the compiler drops it
    a[threadIdx.x] += 1.0f;
}
"""


def _cubin(source: str, arch: str) -> bytes:
    program = nvrtc.createProgram(source, "k.cu", [], [])
    try:
        nvrtc.compileProgram(program, [f"--gpu-architecture={arch}"])
        return bytes(nvrtc.getCUBIN(program))
    finally:
        nvrtc.destroyProgram(program)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    ("source", "tools"),
    [
        (PLAIN, ["memcheck"]),
        (SHARED, ["memcheck", "racecheck"]),
        (DYNAMIC_SHARED, ["memcheck", "racecheck"]),
        (BARRIER, ["memcheck", "synccheck"]),
        (TILED, ["memcheck", "racecheck", "synccheck"]),
        (SHUFFLE, ["memcheck", "synccheck"]),
        (VOTE, ["memcheck", "synccheck"]),
        (HELPER, ["memcheck", "synccheck"]),
        (ONLY_WORDS, ["memcheck"]),
    ],
    ids=[
        "plain",
        "shared",
        "dynamic-shared",
        "barrier",
        "tiled",
        "shuffle",
        "vote",
        "barrier-in-a-helper",
        "only-words",
    ],
)
def test_the_tools_follow_what_the_cubin_does(source: str, tools: list[str], arch: str) -> None:
    needed = tools_needed(_cubin(source, arch))
    assert list(needed) == tools, needed
    assert needed["memcheck"] == "always"


def test_the_reasons_name_the_kernel() -> None:
    needed = tools_needed(_cubin(TILED, "sm_90"))
    assert needed["racecheck"] == "shared memory in k"
    assert needed["synccheck"] == "barriers or warp-synchronous instructions in k"
    facts = sync_facts(_cubin(TILED, "sm_90"))
    assert facts.barriers == {"k": 1} and facts.shared == ("k",)


def test_bytes_that_are_no_cubin_run_every_tool() -> None:
    needed = tools_needed(b"\x7fELF not really")
    assert list(needed) == ["memcheck", "racecheck", "synccheck"]
    assert all("could not be read" in why for why in needed.values())
