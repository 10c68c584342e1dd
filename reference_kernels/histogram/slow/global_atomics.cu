// expect-profile: global_atomics
// expect-line: 13
// why: Every element adds 1 to its bin in global memory with atomicAdd. The 256 bins live in one kilobyte of the L2 cache, where the atomics of the whole grid wait their turn, and a warp's 32 atomics land on many different sectors. The shared_atomics reference counts in shared memory per block and adds each block's bins to global memory once.
extern "C" __global__ void histogram(const unsigned char* data, unsigned int* bins,
                                     unsigned long long n)
{
    const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        const unsigned int bin = data[i];
        // One atomic on global memory per element: the threads of the whole grid contend for
        // the same 256 addresses.
        atomicAdd(&bins[bin], 1u);
    }
}
