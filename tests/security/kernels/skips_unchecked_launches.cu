// lab: matmul-tiled
// stage: run
// expect-verdict: wrong_answer | no_output
// expect-message: whole work on every launch
// timing: on
// why: does the product on a size's first launch (the correctness run) and from its eighth launch on, and returns at once on launches 2 to 7: the grader used to check only the first launch and the last timed one, so those skipped launches pulled the median down for free.
#define TILE_WIDTH 16
__device__ int last_m = -1, last_n = -1, last_k = -1;
__device__ unsigned int launches = 0, blocks_done = 0;

extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float tileA[TILE_WIDTH][TILE_WIDTH];
    __shared__ float tileB[TILE_WIDTH][TILE_WIDTH];
    __shared__ int skip;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE_WIDTH + ty, col = blockIdx.x * TILE_WIDTH + tx;
    if (tx == 0 && ty == 0) {
        const int same = last_m == M && last_n == N && last_k == K;
        skip = same && launches >= 1 && launches < 8;
    }
    __syncthreads();
    if (!skip) {
        float sum = 0.0f;
        for (int p = 0; p < (N + TILE_WIDTH - 1) / TILE_WIDTH; ++p) {
            tileA[ty][tx] = (row < M && p * TILE_WIDTH + tx < N) ? A[row * N + p * TILE_WIDTH + tx] : 0.0f;
            tileB[ty][tx] = (p * TILE_WIDTH + ty < N && col < K) ? B[(p * TILE_WIDTH + ty) * K + col] : 0.0f;
            __syncthreads();
            for (int k = 0; k < TILE_WIDTH; ++k) sum += tileA[ty][k] * tileB[k][tx];
            __syncthreads();
        }
        if (row < M && col < K) C[row * K + col] = sum;
    }
    if (tx == 0 && ty == 0) {
        __threadfence();
        if (atomicAdd(&blocks_done, 1u) == gridDim.x * gridDim.y - 1) {  // the last block
            const int same = last_m == M && last_n == N && last_k == K;
            launches = same ? launches + 1 : 1;
            last_m = M; last_n = N; last_k = K;
            blocks_done = 0;
            __threadfence();
        }
    }
}
