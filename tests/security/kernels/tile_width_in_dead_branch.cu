// lab: matmul-tiled
// stage: run
// expect-verdict: pass
// why: the tile width is chosen by the preprocessor: the grader read 32 from the dead branch,
//      the compiler used 16, and a correct kernel launched with 32 x 32 blocks read past its
//      16 x 16 tiles ("illegal address"). The grader must launch it with 16.
#if 0
#define TILE_WIDTH 32
#else
#define TILE_WIDTH 16
#endif

extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float tileA[TILE_WIDTH][TILE_WIDTH];
    __shared__ float tileB[TILE_WIDTH][TILE_WIDTH];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * TILE_WIDTH + ty;
    const int col = blockIdx.x * TILE_WIDTH + tx;

    float sum = 0.0f;
    const int phases = (N + TILE_WIDTH - 1) / TILE_WIDTH;  // the last phase may be partial
    for (int p = 0; p < phases; ++p) {
        // Every thread of the block loads, even those outside C: they load zeros, so the
        // partial tiles at the edges add nothing, and every thread reaches both barriers.
        const int aCol = p * TILE_WIDTH + tx;
        const int bRow = p * TILE_WIDTH + ty;
        tileA[ty][tx] = (row < M && aCol < N) ? A[row * N + aCol] : 0.0f;
        tileB[ty][tx] = (bRow < N && col < K) ? B[bRow * K + col] : 0.0f;
        __syncthreads();  // the tiles are complete before anyone reads them

#pragma unroll
        for (int k = 0; k < TILE_WIDTH; ++k) {
            sum += tileA[ty][k] * tileB[k][tx];
        }
        __syncthreads();  // everyone is done with the tiles before the next phase overwrites them
    }
    if (row < M && col < K) {
        C[row * K + col] = sum;
    }
}
