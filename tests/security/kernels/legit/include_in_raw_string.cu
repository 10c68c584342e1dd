// lab: vector-scale
// stage: run
// expect-verdict: pass
// expect-warnings: 0
// why: the host harness the kernel was developed with, kept in the file as text inside a raw
//      string literal. Its `#include` lines are characters of a string to the compiler; the
//      grader read them as directives and refused the file (issue 34, case 4).
__device__ const char host_harness[] = R"harness(
#include <vector>
#include <cstdio>
int main()
{
    std::vector<float> x(1000, 1.0f), y(1000);
    // cudaMalloc, cudaMemcpy, scale<<<4, 256>>>(...), cudaMemcpy back
    std::printf("%f\n", y[0]);
}
)harness";

extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        dst[i] = src[i] * factor;
    }
    if (i == n) {
        (void)host_harness[0];  // referenced, so no "declared but never referenced" warning
    }
}
