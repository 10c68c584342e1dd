// expect-profile: divergence
// expect-line: 22
// why: The tree adds with interleaved addressing: in the round of stride s only the threads whose index is a multiple of 2s work, so every warp has a few working threads and many idle ones that still take the warp's turn (warp divergence). The shared_tree reference keeps the working threads together (t < half): whole warps work or wait.
extern "C" __global__ void block_sum(const float* src, float* partial, unsigned int n)
{
    extern __shared__ float sdata[];
    const unsigned int t = threadIdx.x;

    float sum = 0.0f;
    for (unsigned int i = blockIdx.x * blockDim.x + t; i < n; i += blockDim.x * gridDim.x) {
        sum += src[i];
    }
    sdata[t] = sum;
    __syncthreads();

    // Interleaved addressing: the working threads are 2s apart, spread over every warp, and
    // fewer of each warp's 32 threads work every round.
    for (unsigned int stride = 1; stride < blockDim.x; stride *= 2) {
        if (t % (2 * stride) == 0) {
            // Only the threads whose index is a multiple of 2 * stride add here; the other
            // threads of their warp wait for them.
            sdata[t] += sdata[t + stride];
        }
        __syncthreads();
    }
    if (t == 0) {
        partial[blockIdx.x] = sdata[0];
    }
}
