// expect-verdict: wrong_answer
// expect-fail-case: overflow-512x1000
// expect-pass-case: row-1x1000
// why: The kernel computes exp(x) / sum of exp(x) without subtracting the row's maximum first. Mathematically the same, but expf overflows to infinity above 88.7: with values spread by 30 most rows hold such a value, and infinity / infinity is NaN. With values near 0 (row-1x1000) it is right.
#include <float.h>

__device__ float block_sum(float v, float* per_warp)
{
    for (int offset = 16; offset > 0; offset /= 2) {
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    }
    const int lane = threadIdx.x % 32;
    if (lane == 0) {
        per_warp[threadIdx.x / 32] = v;
    }
    __syncthreads();
    v = lane < blockDim.x / 32 ? per_warp[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) {
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    }
    __syncthreads();
    return v;
}

extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols)
{
    __shared__ float per_warp[32];
    const float* in = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;

    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        s += expf(in[c]);  // no maximum subtracted
    }
    s = block_sum(s, per_warp);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        out[c] = expf(in[c]) / s;
    }
}
