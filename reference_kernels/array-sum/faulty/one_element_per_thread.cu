// expect-verdict: wrong_answer
// expect-fail-case: n-1048579
// expect-pass-case: n-1000
// why: Each thread adds only the element at its own index (no grid-stride loop), as if there were a thread per element. The grid has at most 1024 blocks of 1024 threads, so for n = 2^20 + 3 the last 3 elements are never added: 0.60 on this case's data, 26 times the lab's tolerance there (0.023); with n up to 2^20 (n = 1000) every element has its thread and the answer is right.
extern "C" __global__ void block_sum(const float* src, float* partial, unsigned int n)
{
    extern __shared__ float sdata[];
    const unsigned int t = threadIdx.x;
    const unsigned int i = blockIdx.x * blockDim.x + t;

    sdata[t] = i < n ? src[i] : 0.0f;  // should loop: i += blockDim.x * gridDim.x
    __syncthreads();

    for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half) {
            sdata[t] += sdata[t + half];
        }
        __syncthreads();
    }
    if (t == 0) {
        partial[blockIdx.x] = sdata[0];
    }
}
