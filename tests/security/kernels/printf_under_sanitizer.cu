// lab: vector-scale
// stage: run
// expect-verdict: pass
// sanitizer: on
// why: every thread prints a long line, under compute-sanitizer too, where the tools' output is read with a cap: the grade is unchanged and nothing grows without bound.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        dst[i] = src[i] * factor;
        printf("thread %u of a flood that goes on and on and on and on and on and on and on and on\n", i);
    }
}
