// lab: vector-scale
// stage: compile
// expect-verdict: forbidden_include
// expect-message: HOST_FILE
// why: a computed include hides the path in a macro, so a scan for quoted paths misses it.
#define HOST_FILE "/etc/passwd"
#include HOST_FILE
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
}
