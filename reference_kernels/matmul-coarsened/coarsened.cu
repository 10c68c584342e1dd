// Reference: tiled matrix multiplication with thread coarsening (seed 001, Lab 14-3). Each block
// of TILE_WIDTH x TILE_WIDTH threads computes TILE_WIDTH rows by COARSE_FACTOR * TILE_WIDTH
// columns of C: thread (ty, tx) owns the COARSE_FACTOR elements of its row at columns
// colStart, colStart + TILE_WIDTH, ... The tile of A is loaded once per phase and reused for
// all COARSE_FACTOR tiles of B. Any sizes; the last column strip may be partial.
#define TILE_WIDTH 32
#define COARSE_FACTOR 4

extern "C" __global__ void __launch_bounds__(TILE_WIDTH * TILE_WIDTH)
matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float tileA[TILE_WIDTH][TILE_WIDTH];
    __shared__ float tileB[COARSE_FACTOR][TILE_WIDTH][TILE_WIDTH];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * TILE_WIDTH + ty;
    const int colStart = blockIdx.x * TILE_WIDTH * COARSE_FACTOR + tx;

    float sum[COARSE_FACTOR];
#pragma unroll
    for (int c = 0; c < COARSE_FACTOR; ++c) {
        sum[c] = 0.0f;
    }

    const int phases = (N + TILE_WIDTH - 1) / TILE_WIDTH;
    for (int p = 0; p < phases; ++p) {
        const int aCol = p * TILE_WIDTH + tx;
        const int bRow = p * TILE_WIDTH + ty;
        // Out-of-range elements load as zeros, so every thread loads and reaches the barriers.
        tileA[ty][tx] = (row < M && aCol < N) ? A[row * N + aCol] : 0.0f;
#pragma unroll
        for (int c = 0; c < COARSE_FACTOR; ++c) {
            const int col = colStart + c * TILE_WIDTH;
            tileB[c][ty][tx] = (bRow < N && col < K) ? B[bRow * K + col] : 0.0f;
        }
        __syncthreads();  // all tiles loaded

#pragma unroll 8
        for (int k = 0; k < TILE_WIDTH; ++k) {
            const float a = tileA[ty][k];
#pragma unroll
            for (int c = 0; c < COARSE_FACTOR; ++c) {
                sum[c] += a * tileB[c][k][tx];
            }
        }
        __syncthreads();  // all reads done before the next phase overwrites the tiles
    }

#pragma unroll
    for (int c = 0; c < COARSE_FACTOR; ++c) {
        const int col = colStart + c * TILE_WIDTH;
        if (row < M && col < K) {
            C[row * K + col] = sum[c];
        }
    }
}
