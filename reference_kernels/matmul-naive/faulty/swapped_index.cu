// expect-verdict: wrong_answer
// expect-fail-case: square-64
// expect-pass-case: square-1
// why: B is indexed as if it were stored column-major (B[col * N + i]), so the kernel computes A times B transposed; only a 1 x 1 product comes out right.
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < K) {
        float sum = 0.0f;
        for (int i = 0; i < N; ++i) {
            sum += A[row * N + i] * B[col * N + i];  // should be B[i * K + col]
        }
        C[row * K + col] = sum;
    }
}
