// lab: vector-scale
// stage: run
// expect-verdict: no_output | wrong_answer
// timing: on
// why: works only while a __device__ counter says it is the first launch; later launches (timing) do nothing.
__device__ unsigned long long blocks_done = 0;

extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned long long total_blocks = gridDim.x;
    // In the first launch fewer than all blocks have finished; afterwards the counter is past it.
    if (blocks_done < total_blocks) {
        unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) dst[i] = src[i] * factor;
    }
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(&blocks_done, 1ull);
}
