// lab: vector-scale
// stage: run
// expect-verdict: pass
// expect-warnings: 0
// why: NVRTC's documented diagnostic pragmas, pushed and popped around a helper whose unused
//      variable would warn. The grader's pragma allow-list had `nv_diag_*` but not
//      `nv_diagnostic`, and refused the file (issue 34, case 3).
#pragma nv_diagnostic push
#pragma nv_diag_suppress 177  // "declared but never referenced": kept for debugging
__device__ float scaled(float x, float factor)
{
    float unused_debug_copy = x;
    return x * factor;
}
#pragma nv_diagnostic pop

extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        dst[i] = scaled(src[i], factor);
    }
}
