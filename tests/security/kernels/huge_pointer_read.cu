// lab: vector-scale
// stage: run
// expect-verdict: kernel_error
// expect-message: illegal address
// why: a read a terabyte past the input lands in no allocation.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float* far = src + (1ull << 38);
    if (i < n) dst[i] = far[i] * factor;
}
