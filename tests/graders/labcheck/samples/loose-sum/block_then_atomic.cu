// Reference: each block first adds up its elements (warp shuffles, then the per-warp sums),
// and only thread 0 of each block adds the block's total to *out with one atomicAdd. Far
// fewer atomics than one per element, and each adds a partial sum rather than a single value.
__device__ float warp_total(float value)
{
    for (int offset = 16; offset > 0; offset /= 2) {
        value += __shfl_down_sync(0xffffffffu, value, offset);
    }
    return value;  // lane 0 holds the warp's total
}

extern "C" __global__ void atomic_sum(const float* src, float* out, unsigned int n)
{
    __shared__ float warp_sums[32];
    const unsigned int lane = threadIdx.x % 32;
    const unsigned int warp = threadIdx.x / 32;

    float sum = 0.0f;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += blockDim.x * gridDim.x) {
        sum += src[i];
    }
    sum = warp_total(sum);
    if (lane == 0) {
        warp_sums[warp] = sum;
    }
    __syncthreads();  // every warp's total is in shared memory

    if (warp == 0) {
        const unsigned int warps = blockDim.x / 32;
        float total = lane < warps ? warp_sums[lane] : 0.0f;
        total = warp_total(total);
        if (lane == 0) {
            atomicAdd(out, total);
        }
    }
}
