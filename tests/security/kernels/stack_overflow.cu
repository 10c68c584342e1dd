// lab: vector-scale
// stage: run
// expect-verdict: kernel_error
// why: unbounded recursion on the device overflows the thread's stack.
__device__ float deeper(float x, unsigned int depth)
{
    volatile float pad[64];
    pad[depth % 64] = x;
    return depth == 0xffffffffu ? pad[0] : deeper(x + pad[depth % 64], depth + 1) + 1.0f;
}

extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = deeper(src[i] * factor, 0);
}
