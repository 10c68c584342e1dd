// Reference: products summed per thread, then per warp with register shuffles, then across
// the block's warps by warp 0; thread 0 writes the block's sum to partial[blockIdx.x].
// Right for any block size that is a multiple of 32 (the lab launches 1024 threads).
__device__ double warp_total(double value)
{
    for (int offset = 16; offset > 0; offset /= 2) {
        value += __shfl_down_sync(0xffffffffu, value, offset);
    }
    return value;  // lane 0 holds the warp's total
}

extern "C" __global__ void dot(const double* a, const double* b, double* partial, int n)
{
    __shared__ double warp_sums[32];
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;

    double sum = 0.0;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        sum += a[k] * b[k];
    }
    sum = warp_total(sum);
    if (lane == 0) {
        warp_sums[warp] = sum;
    }
    __syncthreads();  // every warp's total is in shared memory

    if (warp == 0) {
        const int warps = blockDim.x / 32;
        double total = lane < warps ? warp_sums[lane] : 0.0;
        total = warp_total(total);
        if (lane == 0) {
            partial[blockIdx.x] = total;
        }
    }
}
