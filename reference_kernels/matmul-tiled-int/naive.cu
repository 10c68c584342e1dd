// Reference: one thread per element of C, in int, operands read from global memory.
// A is M x N, B is N x K, C is M x K, all row-major.
extern "C" __global__ void matmul(const int* A, const int* B, int* C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    // The grid is rounded up to whole blocks, so the last blocks hang over the edge of C.
    if (row >= M || col >= K) {
        return;
    }
    int sum = 0;
    for (int i = 0; i < N; ++i) {
        sum += A[row * N + i] * B[i * K + col];
    }
    C[row * K + col] = sum;
}
