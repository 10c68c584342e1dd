// lab: vector-scale
// stage: run
// expect-verdict: timeout
// expect-message: did not finish
// why: a loop the compiler cannot remove (it reads the clock each turn) never ends.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    // A `volatile` local is not enough: NVVM keeps it in a register and drops the loop.
    long long start = clock64();
    while (clock64() - start >= 0) { }
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
}
