// Reference in the style of seed 002's kernel_add_atomic: every element is added to *out with
// its own atomicAdd, in a grid-stride loop. Simple and slow (all threads contend for one
// address), and a single float accumulator loses precision as the sum grows.
extern "C" __global__ void atomic_sum(const float* src, float* out, unsigned int n)
{
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += blockDim.x * gridDim.x) {
        atomicAdd(out, src[i]);
    }
}
