// lab: matmul-tiled
// stage: run
// expect-verdict: pass
// timing: on
// test: dedicated (tests/security/test_hidden_leaks_gpu.py)
// why: a correct tiled product that keeps every size it is launched with in __device__ memory and prints the whole list from every launch: run after the hidden cases (the timed launches did), it prints the hidden sizes where the student reads them at once.
#define TILE_WIDTH 16
#define SEEN 32
__device__ int seen_m[SEEN], seen_n[SEEN], seen_k[SEEN];
__device__ unsigned int seen_count = 0;

extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float tileA[TILE_WIDTH][TILE_WIDTH];
    __shared__ float tileB[TILE_WIDTH][TILE_WIDTH];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE_WIDTH + ty, col = blockIdx.x * TILE_WIDTH + tx;
    if (blockIdx.x == 0 && blockIdx.y == 0 && tx == 0 && ty == 0) {
        bool known = false;
        for (unsigned int i = 0; i < seen_count && i < SEEN; ++i)
            known = known || (seen_m[i] == M && seen_n[i] == N && seen_k[i] == K);
        if (!known && seen_count < SEEN) {
            seen_m[seen_count] = M; seen_n[seen_count] = N; seen_k[seen_count] = K;
            ++seen_count;
        }
        for (unsigned int i = 0; i < seen_count && i < SEEN; ++i)
            printf("seen size M=%d N=%d K=%d\n", seen_m[i], seen_n[i], seen_k[i]);
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
