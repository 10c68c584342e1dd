// expect-verdict: no_output
// expect-fail-case: n-1000
// why: The product is computed into a local variable and never stored, so dst keeps the grader's marker value everywhere; that must be reported as writing nothing, not as a pass.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float scaled = src[i] * factor;
        (void)scaled;  // forgot: dst[i] = scaled;
    }
}
