// A correct vector-scale kernel that prints the size of every case it runs: the output of a
// hidden case must not reach the student (only pass or fail, until the due date).
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) {
        printf("kg-size n=%u\n", n);
    }
    if (i < n) {
        dst[i] = src[i] * factor;
    }
}
