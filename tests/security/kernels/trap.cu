// lab: vector-scale
// stage: run
// expect-verdict: kernel_error
// expect-message: trap
// why: __trap() aborts the kernel and poisons the CUDA context of the process.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
    if (i == 0) __trap();
}
