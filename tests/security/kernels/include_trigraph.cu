// lab: vector-scale
// stage: compile
// expect-verdict: compile_error
// expect-message: on line 8: expected a declaration
// why: `??=` was the trigraph for `#`. C++17, NVRTC's standard here, has no trigraphs: the line
//      is no directive, NVRTC never opens the file and reports a syntax error. Under C++14,
//      where NVRTC reads trigraphs, the grader refuses any (test_compile_attacks.py).
??=include "/etc/passwd"
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
}
