// lab: vector-scale
// stage: run
// expect-verdict: kernel_error
// expect-message: trap
// why: the same trap written as inline PTX, which no source scan for __trap() sees.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
    if (i == n - 1) asm volatile("trap;");
}
