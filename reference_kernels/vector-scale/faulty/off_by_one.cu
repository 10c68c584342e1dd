// expect-verdict: out_of_bounds_write
// expect-fail-case: n-1000
// expect-pass-case: n-67108864
// why: The bound is `i <= n`, so the thread with i == n writes dst[n], one element past the end. The grid has 256-thread blocks rounded up, so that thread exists unless n is a multiple of 256: n = 1000 writes past the end, n = 64 * 2^20 does not.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) {
        dst[i] = src[i] * factor;
    }
}
