// lab: vector-scale
// stage: run
// expect-verdict: timeout
// expect-message: did not finish
// why: a loop the compiler cannot remove (volatile) never ends: killed at the case limit.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    volatile unsigned int spin = 1;
    while (spin) { }
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
}
