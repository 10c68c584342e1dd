// lab: vector-scale
// stage: run
// expect-verdict: out_of_bounds_write
// expect-message: past the end of dst
// why: writes the right answer, then 64 more elements past the end of dst.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
    if (i < 64) dst[n + i] = 12345.0f;
}
