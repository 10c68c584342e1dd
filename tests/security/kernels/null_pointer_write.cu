// lab: vector-scale
// stage: run
// expect-verdict: kernel_error
// expect-message: illegal address
// why: every thread writes through a null pointer.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    float* nowhere = nullptr;
    if (i < n) nowhere[i] = src[i] * factor;
}
