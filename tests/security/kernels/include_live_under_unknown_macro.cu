// lab: vector-scale
// stage: compile
// expect-verdict: forbidden_include
// expect-message: Line 8 includes
// why: a host include under a condition the grader cannot evaluate (a reserved name NVRTC may
//      define) may be live: it is refused, not guessed dead.
#ifdef __CUDACC_SOMETHING_NEW__
#include "/etc/passwd"
#endif
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
}
