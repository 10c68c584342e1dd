// Reference in the style of seed 002's kernel_mul: a grid-stride loop, right for any grid,
// whether it has fewer threads than elements (the seed's <<<512, 512>>>) or more.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    const unsigned int stride = blockDim.x * gridDim.x;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        dst[i] = src[i] * factor;
    }
}
