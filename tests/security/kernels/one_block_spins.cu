// lab: vector-scale
// stage: run
// expect-verdict: timeout
// expect-message: did not finish
// why: all blocks but the first finish; block 0 spins forever, so the launch never completes.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
    if (blockIdx.x == 0) {
        long long start = clock64();
        while (clock64() - start >= 0) { }
    }
}
