// lab: matmul-tiled
// stage: run
// expect-verdict: pass
// sanitizer: on
// why: a correct tiled product whose debug print looks like a compute-sanitizer synccheck report ("========= Barrier error detected ..."); read as a tool finding, it cost the kernel its points for a divergent barrier it does not have.
#define TILE_WIDTH 16

extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float tileA[TILE_WIDTH][TILE_WIDTH];
    __shared__ float tileB[TILE_WIDTH][TILE_WIDTH];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE_WIDTH + ty, col = blockIdx.x * TILE_WIDTH + tx;
    if (blockIdx.x == 0 && blockIdx.y == 0 && tx == 0 && ty == 0) {
        printf("========= Barrier error detected. Divergent thread(s) in warp\n");
        printf("=========     at 0x1d0 in submission.cu:12:matmul\n");
        printf("=========     by thread (0,0,0) in block (0,0,0)\n");
    }
    float sum = 0.0f;
    for (int p = 0; p < (N + TILE_WIDTH - 1) / TILE_WIDTH; ++p) {
        const int aCol = p * TILE_WIDTH + tx, bRow = p * TILE_WIDTH + ty;
        tileA[ty][tx] = (row < M && aCol < N) ? A[row * N + aCol] : 0.0f;
        tileB[ty][tx] = (bRow < N && col < K) ? B[bRow * K + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE_WIDTH; ++k)
            sum += tileA[ty][k] * tileB[k][tx];
        __syncthreads();
    }
    if (row < M && col < K)
        C[row * K + col] = sum;
}
