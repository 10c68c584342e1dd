// expect-verdict: no_output
// expect-fail-case: n-10000
// expect-pass-case: n-1
// expect-message: never written
// why: Only block 0 writes its partial sum (the kernel was written for a single block, as in seed 000's first dot product); the other blocks' entries of partial keep the grader's marker, and the grader must say that those partial sums were never written rather than add up garbage. With one block (n = 1) it is right.
#define TILE_WIDTH 1024

extern "C" __global__ void dot(const double* a, const double* b, double* partial, int n)
{
    __shared__ double tile[TILE_WIDTH];
    const int t = threadIdx.x;

    double sum = 0.0;
    for (int k = blockIdx.x * blockDim.x + t; k < n; k += gridDim.x * blockDim.x) {
        sum += a[k] * b[k];
    }
    tile[t] = sum;
    __syncthreads();

    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half) {
            tile[t] += tile[t + half];
        }
        __syncthreads();
    }
    if (t == 0 && blockIdx.x == 0) {
        partial[0] = tile[0];
    }
}
