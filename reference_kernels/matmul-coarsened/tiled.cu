// Reference for the matmul labs: shared-memory tiles of TILE_WIDTH x TILE_WIDTH, one thread per
// element of C. A is M x N, B is N x K, C is M x K, all row-major; any sizes, not only
// multiples of the tile.
// It declares a coarsening factor of 1, so the lab's grid has one thread per element of C.
#define TILE_WIDTH 32
#define COARSE_FACTOR 1

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
