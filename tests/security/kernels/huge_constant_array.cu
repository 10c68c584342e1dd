// lab: vector-scale
// stage: compile
// expect-verdict: compile_error
// expect-message: constant
// why: 4 MiB of __constant__ memory, where 64 KiB is all there is; the assembler refuses it.
__constant__ float table[1 << 20];

extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor + table[i % (1 << 20)];
}
