// lab: vector-scale
// stage: compile
// expect-verdict: compile_error
// expect-message: shared
// why: 4 MiB of static shared memory; no GPU has that per block, so the compiler refuses it.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    __shared__ float hoard[1 << 20];
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    hoard[threadIdx.x] = (i < n) ? src[i] : 0.0f;
    __syncthreads();
    if (i < n) dst[i] = hoard[threadIdx.x] * factor;
}
