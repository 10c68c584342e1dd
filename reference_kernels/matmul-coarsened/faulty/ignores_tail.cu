// expect-verdict: wrong_answer
// expect-fail-case: square-1023
// expect-pass-case: square-1024
// why: Each thread stores its COARSE results only when all of them lie inside C (it tests the last column of its strip), so in the last, partial strip the threads whose first columns exist but whose last do not store nothing. Right when K is a multiple of T * COARSE = 64 (square-64, square-1024), wrong at 1023.
#define TILE_WIDTH 32
#define COARSE_FACTOR 2

extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float tileA[TILE_WIDTH][TILE_WIDTH];
    __shared__ float tileB[TILE_WIDTH][TILE_WIDTH];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * TILE_WIDTH + ty;
    const int colStart = blockIdx.x * TILE_WIDTH * COARSE_FACTOR + tx;

    float sum[COARSE_FACTOR];
    for (int c = 0; c < COARSE_FACTOR; ++c) {
        sum[c] = 0.0f;
    }
    for (int p = 0; p < (N + TILE_WIDTH - 1) / TILE_WIDTH; ++p) {
        const int aCol = p * TILE_WIDTH + tx;
        const int bRow = p * TILE_WIDTH + ty;
        tileA[ty][tx] = (row < M && aCol < N) ? A[row * N + aCol] : 0.0f;
        for (int c = 0; c < COARSE_FACTOR; ++c) {
            const int col = colStart + c * TILE_WIDTH;
            tileB[ty][tx] = (bRow < N && col < K) ? B[bRow * K + col] : 0.0f;
            __syncthreads();
            for (int k = 0; k < TILE_WIDTH; ++k) {
                sum[c] += tileA[ty][k] * tileB[k][tx];
            }
            __syncthreads();
        }
    }
    // Only the strip's last column is checked: the tail of K is left unwritten.
    if (row < M && colStart + (COARSE_FACTOR - 1) * TILE_WIDTH < K) {
        for (int c = 0; c < COARSE_FACTOR; ++c) {
            C[row * K + colStart + c * TILE_WIDTH] = sum[c];
        }
    }
}
