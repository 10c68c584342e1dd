// lab: vector-scale
// stage: compile
// expect-verdict: forbidden_include
// expect-message: includes <.../shadow>
// why: the angle-bracket form takes absolute paths too.
#include </etc/shadow>
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
}
