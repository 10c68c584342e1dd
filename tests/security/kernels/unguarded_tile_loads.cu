// lab: matmul-tiled
// stage: run
// expect-verdict: wrong_answer | memory_error
// sanitizer: on
// why: loads its tiles with no bounds checks (only the store is guarded): at a ragged size the last tile reads past the end of B, into the guard band. The guard's bytes used to read as about -2.9e-16, so the product came out right; now they are NaN, and memcheck names the line of the read.
#define TILE_WIDTH 32

extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float tileA[TILE_WIDTH][TILE_WIDTH];
    __shared__ float tileB[TILE_WIDTH][TILE_WIDTH];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE_WIDTH + ty, col = blockIdx.x * TILE_WIDTH + tx;
    float sum = 0.0f;
    for (int p = 0; p < (N + TILE_WIDTH - 1) / TILE_WIDTH; ++p) {
        tileA[ty][tx] = A[row * N + p * TILE_WIDTH + tx];
        tileB[ty][tx] = B[(p * TILE_WIDTH + ty) * K + col];
        __syncthreads();
        for (int k = 0; k < TILE_WIDTH; ++k) sum += tileA[ty][k] * tileB[k][tx];
        __syncthreads();
    }
    if (row < M && col < K) C[row * K + col] = sum;
}
