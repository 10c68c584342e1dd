// expect-verdict: input_modified
// expect-fail-case: n-1000
// why: The product is computed in place in `a` (its const cast away) and then copied to c; c is right, but the kernel destroyed an input, which the grader must report.
extern "C" __global__ void hadamard(const float* a, const float* b, float* c, unsigned int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float* work = const_cast<float*>(a);
        work[i] *= b[i];
        c[i] = work[i];
    }
}
