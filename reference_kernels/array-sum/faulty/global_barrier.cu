// expect-verdict: wrong_answer
// expect-fail-case: n-1048579
// expect-pass-case: n-1000
// why: Seed 002's kernel_add_global: the reduction runs in global memory across the whole grid, with __syncthreads() between rounds as if it waited for every block. It waits only for the threads of one block, so with one block (n up to 1024) the answer is right, and with many blocks block 0 reads other blocks' values before they are written.
// Every thread's grid-stride sum goes into this global work array (one slot per thread of
// the largest grid the lab launches: 1024 blocks of 1024 threads).
__device__ float work[1024 * 1024];

extern "C" __global__ void block_sum(const float* src, float* partial, unsigned int n)
{
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned int threads = blockDim.x * gridDim.x;

    float sum = 0.0f;
    for (unsigned int j = i; j < n; j += threads) {
        sum += src[j];
    }
    work[i] = sum;
    __syncthreads();

    // Halve the number of live values each round (rounding up, so any count works).
    for (unsigned int count = threads; count > 1;) {
        const unsigned int half = (count + 1) / 2;
        if (i + half < count) {
            work[i] += work[i + half];
        }
        count = half;
        __syncthreads();  // waits for this block only, not for the other blocks
    }
    if (threadIdx.x == 0) {
        // Block 0 believes work[0] now holds everything; the others contribute nothing.
        partial[blockIdx.x] = blockIdx.x == 0 ? work[0] : 0.0f;
    }
}
