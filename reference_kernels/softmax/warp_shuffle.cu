// Reference: one block per row. The threads stride along the row to find its maximum, then
// the sum of exp(x - max), then write exp(x - max) / sum. Each block-wide maximum and sum
// is taken with warp shuffles, then across the warps through 32 floats of shared memory.
// Needs a block that is a multiple of 32 threads (the lab launches a power of two >= 32).
#include <float.h>

__device__ float warp_max(float v)
{
    for (int offset = 16; offset > 0; offset /= 2) {
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    }
    return v;  // every lane holds the warp's maximum
}

__device__ float warp_sum(float v)
{
    for (int offset = 16; offset > 0; offset /= 2) {
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    }
    return v;  // every lane holds the warp's sum
}

// Every thread of the block gets the block's maximum (sum): each warp reduces the per-warp
// values itself, so no broadcast is needed.
__device__ float block_max(float v, float* per_warp)
{
    const int lane = threadIdx.x % 32;
    v = warp_max(v);
    if (lane == 0) {
        per_warp[threadIdx.x / 32] = v;
    }
    __syncthreads();  // every warp's maximum is in shared memory
    v = lane < blockDim.x / 32 ? per_warp[lane] : -FLT_MAX;
    v = warp_max(v);
    __syncthreads();  // everyone has read per_warp before it is used again
    return v;
}

__device__ float block_sum(float v, float* per_warp)
{
    const int lane = threadIdx.x % 32;
    v = warp_sum(v);
    if (lane == 0) {
        per_warp[threadIdx.x / 32] = v;
    }
    __syncthreads();
    v = lane < blockDim.x / 32 ? per_warp[lane] : 0.0f;
    v = warp_sum(v);
    __syncthreads();
    return v;
}

extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols)
{
    __shared__ float per_warp[32];
    const float* in = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;

    float m = -FLT_MAX;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        m = fmaxf(m, in[c]);
    }
    m = block_max(m, per_warp);

    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        s += expf(in[c] - m);
    }
    s = block_sum(s, per_warp);

    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        out[c] = expf(in[c] - m) / s;
    }
}
