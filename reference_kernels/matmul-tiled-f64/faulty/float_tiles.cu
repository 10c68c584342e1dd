// expect-verdict: wrong_answer
// expect-fail-case: square-64
// why: Copied from the float kernel, the shared tiles are still float, so every element of A and B is rounded to single precision on its way through shared memory; the result is off by about 1e-8 relative, far outside the double tolerance.
#define TILE_WIDTH 32

extern "C" __global__ void matmul(const double* A, const double* B, double* C, int M, int N, int K)
{
    __shared__ float tileA[TILE_WIDTH][TILE_WIDTH];  // should be double
    __shared__ float tileB[TILE_WIDTH][TILE_WIDTH];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * TILE_WIDTH + ty;
    const int col = blockIdx.x * TILE_WIDTH + tx;

    double sum = 0.0;
    for (int p = 0; p < (N + TILE_WIDTH - 1) / TILE_WIDTH; ++p) {
        const int aCol = p * TILE_WIDTH + tx;
        const int bRow = p * TILE_WIDTH + ty;
        tileA[ty][tx] = (row < M && aCol < N) ? A[row * N + aCol] : 0.0;
        tileB[ty][tx] = (bRow < N && col < K) ? B[bRow * K + col] : 0.0;
        __syncthreads();
        for (int k = 0; k < TILE_WIDTH; ++k) {
            sum += tileA[ty][k] * tileB[k][tx];
        }
        __syncthreads();
    }
    if (row < M && col < K) {
        C[row * K + col] = sum;
    }
}
