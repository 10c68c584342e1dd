// lab: matmul-naive
// stage: run
// expect-verdict: launch_error
// why: __launch_bounds__(64) promises at most 64 threads a block; the lab launches 32x32 = 1024.
extern "C" __global__ void __launch_bounds__(64)
matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= K) return;
    float sum = 0.0f;
    for (int i = 0; i < N; ++i) sum += A[row * N + i] * B[i * K + col];
    C[row * K + col] = sum;
}
