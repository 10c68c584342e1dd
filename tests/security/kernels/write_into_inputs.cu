// lab: vector-scale
// stage: run
// expect-verdict: input_modified
// expect-message: changed its input src
// why: scales in place through a cast-away const, then copies: the input changes.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float* writable = const_cast<float*>(src);
        writable[i] = src[i] * factor;
        dst[i] = writable[i];
    }
}
