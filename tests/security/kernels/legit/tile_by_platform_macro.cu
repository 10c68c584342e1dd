// lab: matmul-tiled
// stage: run
// expect-verdict: pass
// expect-declarations: TILE=32
// expect-warnings: 0
// why: a tile width chosen by a platform macro, as portable CUDA/HIP code is written. NVRTC
//      defines no __HIP_PLATFORM_AMD__, so it compiles TILE_WIDTH 32; the grader read 16 (the
//      first definition under a condition it could not evaluate) and launched 16 x 16 blocks
//      for a kernel written for 32 x 32 tiles (issue 34, case 1).
#if defined(__HIP_PLATFORM_AMD__)
#define TILE_WIDTH 16  // AMD's wavefronts are 64 wide; smaller tiles keep occupancy up there
#else
#define TILE_WIDTH 32
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
    for (int p = 0; p < (N + TILE_WIDTH - 1) / TILE_WIDTH; ++p) {
        const int aCol = p * TILE_WIDTH + tx;
        const int bRow = p * TILE_WIDTH + ty;
        tileA[ty][tx] = (row < M && aCol < N) ? A[row * N + aCol] : 0.0f;
        tileB[ty][tx] = (bRow < N && col < K) ? B[bRow * K + col] : 0.0f;
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
