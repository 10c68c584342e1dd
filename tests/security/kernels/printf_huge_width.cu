// lab: vector-scale
// stage: run
// expect-verdict: timeout
// expect-message: printed
// why: a field width of a billion makes the host write a gigabyte per call, from 32 threads: the grading process was still writing minutes later. Now the case ends at its limit with a verdict.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
    if (n == 1000 && i < 32) printf("%1000000000d\n", (int)i);
}
