// Reference: each block counts its share into its own 256 bins in shared memory (atomics
// there are far cheaper, and only the block's threads contend), then adds its non-zero bins
// to the global histogram: one global atomicAdd per bin per block instead of one per element.
#define BINS 256

extern "C" __global__ void histogram(const unsigned char* data, unsigned int* bins,
                                     unsigned long long n)
{
    __shared__ unsigned int local[BINS];
    for (int b = threadIdx.x; b < BINS; b += blockDim.x) {
        local[b] = 0;
    }
    __syncthreads();  // the block's bins are zero before anyone adds

    const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        atomicAdd(&local[data[i]], 1u);
    }
    __syncthreads();  // every addition of the block is done before the bins are read

    for (int b = threadIdx.x; b < BINS; b += blockDim.x) {
        if (local[b] != 0) {
            atomicAdd(&bins[b], local[b]);
        }
    }
}
