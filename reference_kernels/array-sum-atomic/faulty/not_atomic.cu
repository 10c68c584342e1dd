// expect-verdict: wrong_answer
// expect-fail-case: n-1000
// expect-pass-case: n-1
// why: `*out += src[i]` is a read, an add and a write: threads that read *out at the same time all write back their own sum and all but one addition are lost. With one element it is right; with 1000 most of the sum goes missing.
extern "C" __global__ void atomic_sum(const float* src, float* out, unsigned int n)
{
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += blockDim.x * gridDim.x) {
        *out += src[i];  // should be atomicAdd(out, src[i])
    }
}
