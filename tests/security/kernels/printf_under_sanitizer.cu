// lab: vector-scale
// stage: run
// expect-verdict: pass
// sanitizer: on
// case-seconds: 10
// why: thousands of threads print long lines, under compute-sanitizer too, where the tools' output is read with a cap: the grade is unchanged and nothing grows without bound. (A printf in every one of a million threads is so slow that it times out; printf_every_thread.cu expects that.)
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        dst[i] = src[i] * factor;
        if (i < 8192) printf("thread %u of a flood that goes on and on and on and on and on and on and on and on\n", i);
    }
}
