// lab: vector-scale
// stage: compile
// expect-verdict: forbidden_include
// expect-message: trigraph
// why: `??=` is the trigraph for `#`; off in C++17, but a lab could turn trigraphs on.
??=include "/etc/passwd"
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
}
