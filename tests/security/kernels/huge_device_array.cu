// lab: vector-scale
// stage: run
// expect-verdict: launch_error | kernel_error
// expect-message: memory
// health-check: no
// why: a 256 GiB __device__ array: no GPU can hold the module; loading it must be the
//      submission's verdict in plain words, not a grader failure.
__device__ float hoard[1ull << 36];

extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        hoard[i] = src[i];
        dst[i] = hoard[i] * factor;
    }
}
