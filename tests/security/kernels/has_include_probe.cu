// lab: vector-scale
// stage: compile
// expect-verdict: forbidden_include
// expect-message: __has_include
// why: `__has_include` of a host path answers whether the file exists: a probe of the host.
#if __has_include("/etc/shadow")
#define FOUND 1
#else
#define FOUND 0
#endif
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor * (FOUND ? 1.0f : 1.0f);
}
