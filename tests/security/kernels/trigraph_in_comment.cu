// lab: vector-scale
// stage: compile
// expect-verdict: ok
// expect-message: Compiled for sm_90.
// why: `??)` in a comment (what??) was refused as a trigraph; C++17 has none.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    // does this need a bounds check??) yes: the last block runs past n
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
}
