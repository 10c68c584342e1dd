// lab: vector-scale
// stage: run
// expect-verdict: kernel_error
// expect-message: illegal address
// why: every thread writes through a null pointer.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    // Null at run time only: a literal nullptr store is undefined, and the compiler drops it.
    float* nowhere = reinterpret_cast<float*>(static_cast<unsigned long long>(factor < 0.0f));
    if (i < n) nowhere[i] = src[i] * factor;
}
