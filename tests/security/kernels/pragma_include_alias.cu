// lab: vector-scale
// stage: compile
// expect-verdict: forbidden_include
// expect-message: include_alias
// why: a pragma operator that (in compilers that honour it) maps an allowed header to a host file.
_Pragma("include_alias(\"cuda_runtime.h\", \"/etc/passwd\")")
#include "cuda_runtime.h"
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
}
