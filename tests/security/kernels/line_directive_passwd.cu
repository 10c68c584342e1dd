// lab: vector-scale
// stage: compile
// expect-verdict: compile_error
// expect-message: error
// why: `#line` renames the file in diagnostics; the log must still carry only this file's text.
#line 1 "/etc/passwd"
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor +
}
