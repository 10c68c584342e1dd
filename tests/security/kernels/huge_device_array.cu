// lab: vector-scale
// stage: compile
// expect-verdict: resource_limit
// expect-message: need 256 GiB of GPU memory; this lab allows 1 GiB
// why: a 256 GiB uninitialised __device__ array has no bytes in the cubin, only a size; loading
//      the module would try to allocate it all. Refused from the cubin's symbol sizes before
//      anything runs (one of 48 GiB loaded on an H200 and left other gradings 30 GiB).
__device__ float hoard[1ull << 36];

extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        hoard[i] = src[i];
        dst[i] = hoard[i] * factor;
    }
}
