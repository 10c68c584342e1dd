// lab: matmul-tiled
// stage: run
// expect-verdict: wrong_answer
// expect-message: whole work on every launch
// timing: on
// why: keeps its first correct answer for each size in a __device__ buffer and copies it out on every later launch, so the timed launches cost a copy instead of a product; right only if every timed launch gets the same inputs.
#define TILE_WIDTH 16
#define CACHED (1 << 16)
__device__ float cache[CACHED];
__device__ int cached_m = -1, cached_n = -1, cached_k = -1;
__device__ unsigned int blocks_done = 0;

extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float tileA[TILE_WIDTH][TILE_WIDTH];
    __shared__ float tileB[TILE_WIDTH][TILE_WIDTH];
    __shared__ int replay;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE_WIDTH + ty, col = blockIdx.x * TILE_WIDTH + tx;
    if (tx == 0 && ty == 0) {
        replay = cached_m == M && cached_n == N && cached_k == K && M * K <= CACHED;
    }
    __syncthreads();
    if (replay) {
        if (row < M && col < K) C[row * K + col] = cache[row * K + col];
        return;
    }
    float sum = 0.0f;
    for (int p = 0; p < (N + TILE_WIDTH - 1) / TILE_WIDTH; ++p) {
        tileA[ty][tx] = (row < M && p * TILE_WIDTH + tx < N) ? A[row * N + p * TILE_WIDTH + tx] : 0.0f;
        tileB[ty][tx] = (p * TILE_WIDTH + ty < N && col < K) ? B[(p * TILE_WIDTH + ty) * K + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE_WIDTH; ++k) sum += tileA[ty][k] * tileB[k][tx];
        __syncthreads();
    }
    if (row < M && col < K) {
        C[row * K + col] = sum;
        if (M * K <= CACHED) cache[row * K + col] = sum;
    }
    __syncthreads();
    if (tx == 0 && ty == 0) {
        __threadfence();
        if (atomicAdd(&blocks_done, 1u) == gridDim.x * gridDim.y - 1) {  // the last block
            cached_m = M; cached_n = N; cached_k = K;
            blocks_done = 0;
            __threadfence();
        }
    }
}
