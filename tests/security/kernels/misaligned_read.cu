// lab: vector-scale
// stage: run
// expect-verdict: kernel_error
// expect-message: misaligned
// why: reads a float4 through a pointer one byte off its alignment.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float4* skewed = reinterpret_cast<const float4*>(reinterpret_cast<const char*>(src) + 1);
    if (i < n) {
        float4 v = skewed[i / 4];
        dst[i] = (v.x + src[i]) * factor;
    }
}
