// lab: vector-scale
// stage: compile
// expect-verdict: ok
// expect-message: Compiled for sm_90.
// why: an old host harness kept in a /* */ comment, its #include lines at the start of their
//      lines. The compiler never reads them; the grader refused the file for them.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
}

/* The host code this kernel was tested with:
#include <cstdlib>
#include <cstdio>
#include "timer.h"
#pragma comment(lib, "cudart")

int main()
{
    float* src = (float*) malloc(1024 * sizeof(float));
    free(src);
    return 0;
}
*/
