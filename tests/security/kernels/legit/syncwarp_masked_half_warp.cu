// lab: array-sum
// stage: run
// expect-verdict: pass
// expect-warnings: 0
// why: a block sum whose last 32 partial sums are finished by the first half-warp alone,
//      synchronising exactly its 16 lanes with `__syncwarp(0xffff)` under `if (t < 16)`. The
//      mask names the threads that take the branch, so no thread is missing from the barrier;
//      the grader judged the branch instead of the mask and warned twice (issue 34, case 5).
extern "C" __global__ void block_sum(const float* src, float* partial, unsigned int n)
{
    extern __shared__ float sdata[];
    const unsigned int t = threadIdx.x;

    float sum = 0.0f;
    for (unsigned int i = blockIdx.x * blockDim.x + t; i < n; i += blockDim.x * gridDim.x) {
        sum += src[i];
    }
    sdata[t] = sum;
    __syncthreads();

    for (unsigned int half = blockDim.x / 2; half > 16; half /= 2) {
        if (t < half) {
            sdata[t] += sdata[t + half];
        }
        __syncthreads();
    }
    // 32 partial sums are left in sdata[0..31]: lanes 0 to 15 of the first warp finish them.
    if (t < 16) {
        float v = sdata[t] + sdata[t + 16];
        for (unsigned int s = 8; s > 0; s >>= 1) {
            __syncwarp(0xffff);  // every lane has read what it needs before any writes
            sdata[t] = v;
            __syncwarp(0xffff);  // every lane has written before any reads a neighbour's
            v += sdata[t + s];
        }
        if (t == 0) {
            partial[blockIdx.x] = v;
        }
    }
}
