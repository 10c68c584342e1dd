// lab: vector-scale
// stage: run
// expect-verdict: timeout | output_limit
// expect-message: print
// why: a printf in every one of a million threads takes longer than the case limit even though the GPU drops most of it, or prints more than the limit first: either way the verdict names the printing, not an endless loop.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        dst[i] = src[i] * factor;
        printf("thread %u of a flood that goes on and on and on and on and on and on and on and on\n", i);
    }
}
