// lab: matmul-tiled
// stage: run
// expect-verdict: pass
// why: `const int TILE = blockDim.x;` takes the tile width from the launch. The grader refused
//      it as an unreadable tile width; it must launch the lab's default and say so in a note.
#define MAX_TILE 32

extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    // The tile is the block: any square block up to MAX_TILE works.
    const int TILE = blockDim.x;
    __shared__ float tileA[MAX_TILE][MAX_TILE];
    __shared__ float tileB[MAX_TILE][MAX_TILE];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    float sum = 0.0f;
    const int phases = (N + TILE - 1) / TILE;  // the last phase may be partial
    for (int p = 0; p < phases; ++p) {
        // Every thread of the block loads, even those outside C: they load zeros, so the
        // partial tiles at the edges add nothing, and every thread reaches both barriers.
        const int aCol = p * TILE + tx;
        const int bRow = p * TILE + ty;
        tileA[ty][tx] = (row < M && aCol < N) ? A[row * N + aCol] : 0.0f;
        tileB[ty][tx] = (bRow < N && col < K) ? B[bRow * K + col] : 0.0f;
        __syncthreads();  // the tiles are complete before anyone reads them

        for (int k = 0; k < TILE; ++k) {
            sum += tileA[ty][k] * tileB[k][tx];
        }
        __syncthreads();  // everyone is done with the tiles before the next phase overwrites them
    }
    if (row < M && col < K) {
        C[row * K + col] = sum;
    }
}
