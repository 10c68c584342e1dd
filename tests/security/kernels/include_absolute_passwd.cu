// lab: vector-scale
// stage: compile
// expect-verdict: forbidden_include
// expect-message: includes ".../passwd"
// why: NVRTC opens any path it is given; unguarded, its error log quotes the file line by line.
#include "/etc/passwd"
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
}
