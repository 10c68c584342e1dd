// expect-verdict: wrong_answer
// expect-fail-case: n-1048583
// expect-pass-case: n-10000
// why: The loop takes four elements per step and runs n / 4 steps, forgetting the n % 4 elements at the end: right when n is a multiple of 4 (10000), wrong for 2^20 + 7 (three products missing) and for n = 1 (nothing added at all).
#define TILE_WIDTH 1024

extern "C" __global__ void dot(const double* a, const double* b, double* partial, int n)
{
    __shared__ double tile[TILE_WIDTH];
    const int t = threadIdx.x;

    double sum = 0.0;
    const int stride = gridDim.x * blockDim.x;
    for (int q = blockIdx.x * blockDim.x + t; q < n / 4; q += stride) {
        const int k = 4 * q;
        sum += a[k] * b[k] + a[k + 1] * b[k + 1] + a[k + 2] * b[k + 2] + a[k + 3] * b[k + 3];
    }
    tile[t] = sum;
    __syncthreads();

    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half) {
            tile[t] += tile[t + half];
        }
        __syncthreads();
    }
    if (t == 0) {
        partial[blockIdx.x] = tile[0];
    }
}
