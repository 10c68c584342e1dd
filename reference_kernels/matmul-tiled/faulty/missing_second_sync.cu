// expect-verdict: wrong_answer
// expect-finding: shared_memory_race
// why: The tile loop has no __syncthreads() after the multiply loop, so a fast warp loads the next phase's tiles while slow warps still read the current ones. Whether the plain run's answer comes out wrong varies from run to run (it usually does on the large cases); racecheck on the sanitizer case reports the shared-memory race every time.
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
        const int bRow = p * TILE_WIDTH + ty;
        tileA[ty][tx] = (row < M && aCol < N) ? A[row * N + aCol] : 0.0f;
        tileB[ty][tx] = (bRow < N && col < K) ? B[bRow * K + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE_WIDTH; ++k) {
            sum += tileA[ty][k] * tileB[k][tx];
        }
        // missing: __syncthreads();
    }
    if (row < M && col < K) {
        C[row * K + col] = sum;
    }
}
