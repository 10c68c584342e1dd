// expect-verdict: wrong_answer
// expect-fail-case: n-1000
// why: A copy-paste slip squares a instead of multiplying a by b (c[i] = a[i] * a[i]); every element is wrong.
extern "C" __global__ void hadamard(const float* a, const float* b, float* c, unsigned int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] * a[i];
    }
}
