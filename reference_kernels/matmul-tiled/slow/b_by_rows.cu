// expect-profile: uncoalesced_global
// expect-line: 26
// why: The tile of B is loaded with threadIdx.x walking down B's rows: the 32 threads of a warp read 32 different rows of B, K floats apart, so of each 32-byte sector a warp reads it uses 4 bytes. The tiled reference lets threadIdx.x walk along a row of B, reading whole sectors.
#define TILE_WIDTH 32

extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float tileA[TILE_WIDTH][TILE_WIDTH];
    __shared__ float tileB[TILE_WIDTH][TILE_WIDTH];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * TILE_WIDTH + ty;
    const int col = blockIdx.x * TILE_WIDTH + tx;

    float sum = 0.0f;
    const int phases = (N + TILE_WIDTH - 1) / TILE_WIDTH;
    for (int p = 0; p < phases; ++p) {
        const int aCol = p * TILE_WIDTH + tx;
        tileA[ty][tx] = (row < M && aCol < N) ? A[row * N + aCol] : 0.0f;
        // tileB[r][c] holds B[p * TILE_WIDTH + r][blockIdx.x * TILE_WIDTH + c], as in the
        // reference, but thread (tx, ty) loads element (tx, ty) of the tile: a warp's threads
        // (consecutive tx) read down a column of B, one row of B each.
        const int bRow = p * TILE_WIDTH + tx;
        const int bCol = blockIdx.x * TILE_WIDTH + ty;
        tileB[tx][ty] = (bRow < N && bCol < K) ? B[bRow * K + bCol] : 0.0f;
        __syncthreads();

#pragma unroll
        for (int k = 0; k < TILE_WIDTH; ++k) {
            sum += tileA[ty][k] * tileB[k][tx];
        }
        __syncthreads();
    }
    if (row < M && col < K) {
        C[row * K + col] = sum;
    }
}
