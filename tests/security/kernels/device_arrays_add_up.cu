// lab: vector-scale
// stage: compile
// expect-verdict: resource_limit
// expect-message: need 1.2 GiB of GPU memory; this lab allows 1 GiB
// why: no array is large (each 300 MiB); three are never used, two sit in a namespace, one in
//      the kernel: the module still takes their sum of GPU memory when it is loaded.
namespace spare {
__device__ char a[300 << 20];
__device__ char b[300 << 20];
}
__device__ char c[300 << 20];

extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    static __device__ char d[300 << 20];
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        d[i % (300 << 20)] = 1;
        dst[i] = src[i] * factor + d[(i + 1) % (300 << 20)];
    }
}
