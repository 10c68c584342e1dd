// Reference in the style of seed 002: a grid-stride loop, right for any grid size.
extern "C" __global__ void hadamard(const float* a, const float* b, float* c, unsigned int n)
{
    const unsigned int stride = blockDim.x * gridDim.x;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        c[i] = a[i] * b[i];
    }
}
