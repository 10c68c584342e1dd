// Reference: every element adds 1 to its bin in global memory with atomicAdd, in a
// grid-stride loop. Correct, and slow on skewed data: the threads of the whole grid queue up
// on the same few addresses.
extern "C" __global__ void histogram(const unsigned char* data, unsigned int* bins,
                                     unsigned long long n)
{
    const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        atomicAdd(&bins[data[i]], 1u);
    }
}
