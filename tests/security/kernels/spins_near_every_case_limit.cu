// lab: vector-scale
// stage: run
// expect-verdict: timeout
// expect-message: GPU time
// case-seconds: 4
// test: dedicated (tests/security/test_budget_gpu.py)
// why: correct, but spins about 2.5 s on every launch (each case's limit is 4 s), so a grading of many cases held its worker for minutes; the lab's GPU time per submission now ends it.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (blockIdx.x == 0 && threadIdx.x == 0) {  // one block spins: the launch takes ~2.5 s
        long long start = clock64();
        while (clock64() - start < 5000LL * 1000 * 1000) {
        }
    }
    __syncthreads();
    if (i < n)
        dst[i] = factor * src[i];
}
