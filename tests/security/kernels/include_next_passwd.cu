// lab: vector-scale
// stage: compile
// expect-verdict: forbidden_include
// expect-message: #include_next
// why: `#include_next` is another spelling NVRTC accepts (with a warning) and follows.
#include_next "/etc/passwd"
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
}
