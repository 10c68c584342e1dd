// expect-verdict: wrong_answer
// expect-fail-case: skewed-1048579
// expect-pass-case: n-1
// why: `bins[data[i]]++` is a read, an add and a write. Threads that hit the same bin at the same time each write back their own count, and all but one of their additions are lost; with skewed data nearly every thread hits one of a few bins. With one element there is nothing to lose.
extern "C" __global__ void histogram(const unsigned char* data, unsigned int* bins,
                                     unsigned long long n)
{
    const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        bins[data[i]]++;  // should be atomicAdd(&bins[data[i]], 1u)
    }
}
