// lab: vector-scale
// stage: compile
// expect-verdict: ok
// expect-message: Compiled for sm_90.
// why: host code kept in the file behind guards NVRTC skips (`#ifndef __CUDACC_RTC__`,
//      `#ifdef _MSC_VER`, `#if 0`), as students compile with nvcc and NVRTC alike.
#ifdef _MSC_VER
#pragma warning(disable: 4996)
#endif
#ifndef __CUDACC_RTC__
#include <cstdlib>
#include <vector>
#endif

extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
}

#if 0
#include "check.h"
int main() { return run_checks(); }
#endif
