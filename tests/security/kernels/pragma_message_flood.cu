// lab: vector-scale
// stage: compile
// expect-verdict: compile_error
// expect-message: it is on line 29: identifier "facter" is undefined
// why: a 1 MiB `#pragma message` (2^16 string pieces of 16 bytes) before a real error: the
//      capped log lost the error ("an error that names no line of your file"). Errors come
//      first, pragma text last and cut, so the real error is named with its line.
#define S0 "flood flood floo"
#define S1 S0 S0
#define S2 S1 S1
#define S3 S2 S2
#define S4 S3 S3
#define S5 S4 S4
#define S6 S5 S5
#define S7 S6 S6
#define S8 S7 S7
#define S9 S8 S8
#define S10 S9 S9
#define S11 S10 S10
#define S12 S11 S11
#define S13 S12 S12
#define S14 S13 S13
#define S15 S14 S14
#define S16 S15 S15
#pragma message(S16)
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * facter;
}
