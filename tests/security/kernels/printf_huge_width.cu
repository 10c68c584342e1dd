// lab: vector-scale
// stage: run
// expect-verdict: output_limit
// expect-message: stopped for printing
// why: a field width of a billion makes the host write a gigabyte per call, from 32 threads: the grading process was still writing minutes later, and then the student and an administrator read that the GPU was not healthy. Now the child is stopped once it has printed a few MiB, the case's verdict says so, and the GPU is not blamed.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
    if (n == 1000 && i < 32) printf("%1000000000d\n", (int)i);
}
