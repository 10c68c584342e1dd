// Reference in the style of seed 002's kernel_add_shared: each thread sums its grid-stride
// share, the block adds the per-thread sums pairwise in dynamic shared memory, and thread 0
// writes the block's total to partial[blockIdx.x]. The grader launches it twice: over the
// input (many blocks), then over the partial sums (one block). Needs blockDim.x a power of 2
// (the lab launches 1024 threads) and blockDim.x floats of dynamic shared memory.
extern "C" __global__ void block_sum(const float* src, float* partial, unsigned int n)
{
    extern __shared__ float sdata[];
    const unsigned int t = threadIdx.x;

    float sum = 0.0f;
    for (unsigned int i = blockIdx.x * blockDim.x + t; i < n; i += blockDim.x * gridDim.x) {
        sum += src[i];
    }
    sdata[t] = sum;
    __syncthreads();  // every thread's sum is in shared memory

    for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half) {
            sdata[t] += sdata[t + half];
        }
        __syncthreads();  // this round's additions are done before the next round reads them
    }
    if (t == 0) {
        partial[blockIdx.x] = sdata[0];
    }
}
