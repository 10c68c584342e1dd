// expect-verdict: out_of_bounds_write
// expect-fail-case: skewed-1048579
// why: The kernel reads the data as `char`, which is signed: bytes from 128 to 255 become -128 to -1, and their counts go to bins[-128] .. bins[-1], before the start of bins. The data are centred on 128, so about half of them do.
extern "C" __global__ void histogram(const char* data, unsigned int* bins, unsigned long long n)
{
    const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        const int value = data[i];  // should be unsigned char: 0..255
        atomicAdd(&bins[value], 1u);
    }
}
