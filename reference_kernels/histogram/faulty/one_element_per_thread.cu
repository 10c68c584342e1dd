// expect-verdict: wrong_answer
// expect-fail-case: skewed-1048579
// expect-pass-case: n-1000
// why: Each thread counts only the element at its own index (no grid-stride loop). The grid has at most 1024 blocks of 256 threads, 262144 threads in all, so of 1048579 elements three quarters are never counted; with 1000 elements every one has its thread.
extern "C" __global__ void histogram(const unsigned char* data, unsigned int* bins,
                                     unsigned long long n)
{
    const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {  // should loop: i += blockDim.x * gridDim.x
        atomicAdd(&bins[data[i]], 1u);
    }
}
