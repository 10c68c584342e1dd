// expect-verdict: wrong_answer
// expect-fail-case: n-1000
// why: scan_blocks writes the exclusive scan (the sum of the elements before i, without in[i]), the other common kind of prefix sum; this lab asks for the inclusive one, out[i] = in[0] + ... + in[i]. Every element is off by in[i].
__device__ int warp_scan(int v)
{
    const int lane = threadIdx.x % 32;
    for (int offset = 1; offset < 32; offset *= 2) {
        const int up = __shfl_up_sync(0xffffffffu, v, offset);
        if (lane >= offset) {
            v += up;
        }
    }
    return v;  // the inclusive scan within the warp
}

// The inclusive scan of one value per thread across the block; *total gets the block's sum.
// blockDim.x must be a multiple of 32 (the lab launches 1024).
__device__ int block_scan(int v, int* warp_totals, int* total)
{
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    v = warp_scan(v);
    if (lane == 31) {
        warp_totals[warp] = v;
    }
    __syncthreads();  // every warp's total is in shared memory
    if (warp == 0) {
        const int t = lane < blockDim.x / 32 ? warp_totals[lane] : 0;
        warp_totals[lane] = warp_scan(t);
    }
    __syncthreads();  // the warp totals are scanned
    if (warp > 0) {
        v += warp_totals[warp - 1];
    }
    *total = warp_totals[blockDim.x / 32 - 1];
    __syncthreads();  // everyone has read warp_totals before it is used again
    return v;
}

extern "C" __global__ void scan_blocks(const int* in, int* out, int* block_sums, unsigned int n)
{
    __shared__ int warp_totals[32];
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    int total;
    const int v = block_scan(i < n ? in[i] : 0, warp_totals, &total);
    if (i < n) {
        out[i] = v - in[i];  // exclusive: should be v
    }
    if (threadIdx.x == 0) {
        block_sums[blockIdx.x] = total;
    }
}

extern "C" __global__ void scan_block_sums(int* block_sums, unsigned int nblocks)
{
    __shared__ int warp_totals[32];
    int carry = 0;  // the sum of the chunks already scanned
    for (unsigned int base = 0; base < nblocks; base += blockDim.x) {
        const unsigned int i = base + threadIdx.x;
        int total;
        const int v = block_scan(i < nblocks ? block_sums[i] : 0, warp_totals, &total);
        if (i < nblocks) {
            block_sums[i] = v + carry;
        }
        carry += total;
    }
}

extern "C" __global__ void add_block_offsets(int* out, const int* block_sums, unsigned int n)
{
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (blockIdx.x > 0 && i < n) {
        out[i] += block_sums[blockIdx.x - 1];
    }
}
