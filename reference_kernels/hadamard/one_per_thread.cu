// Reference: one thread per element; the grid covers n, so threads past the end do nothing.
extern "C" __global__ void hadamard(const float* a, const float* b, float* c, unsigned int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] * b[i];
    }
}
