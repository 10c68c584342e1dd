// lab: vector-scale
// stage: compile
// expect-verdict: forbidden_include
// expect-message: includes ".../environ"
// why: the compiler process's environment would hold the worker's secrets if it were not scrubbed.
#include "/proc/self/environ"
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
}
