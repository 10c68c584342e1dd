// lab: vector-scale
// stage: compile
// expect-verdict: ok
// expect-message: Compiled for sm_90.
// why: saved by a Windows editor: a UTF-8 byte-order mark and CRLF line ends. NVRTC reads the
//      mark as a token ("unrecognized token" on line 1); the grader compiles what follows it.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
}
