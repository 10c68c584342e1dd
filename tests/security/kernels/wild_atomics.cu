// lab: vector-scale
// stage: run
// expect-verdict: kernel_error
// expect-message: illegal address
// why: atomics on a made-up address.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    int* wild = reinterpret_cast<int*>(0xdead0000beef00ull);
    if (i < n) atomicAdd(wild + (i % 1024), 1);
    if (i < n) dst[i] = src[i] * factor;
}
