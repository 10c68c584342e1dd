// expect-verdict: missing_kernel
// expect-message: matmul
// why: Without extern "C" the compiler mangles the kernel's name (_Z6matmulPKfS0_Pfiii), so the grader finds no kernel named matmul; the compile stage must say so and hint at extern "C".
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < K) {
        float sum = 0.0f;
        for (int i = 0; i < N; ++i) {
            sum += A[row * N + i] * B[i * K + col];
        }
        C[row * K + col] = sum;
    }
}
