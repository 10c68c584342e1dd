// lab: matmul-tiled
// stage: run
// expect-verdict: pass
// timing: on
// test: dedicated (tests/security/test_hidden_leaks_gpu.py)
// why: a correct tiled product until it meets a size not among the lab's public cases (a hidden one); from then on every launch writes that size into C[0], so a later launch's wrong-answer message ("got 97") carries the hidden size to the student.
#define TILE_WIDTH 16
__device__ int hidden_m = 0;

__device__ bool is_public(int M, int N, int K)
{
    // The dedicated test's lab: its visible cases' sizes are public (they are in lab.toml).
    return (M == 64 && N == 64 && K == 64) || (M == 128 && N == 128 && K == 128) ||
           (M == 63 && N == 65 && K == 70);
}

extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float tileA[TILE_WIDTH][TILE_WIDTH];
    __shared__ float tileB[TILE_WIDTH][TILE_WIDTH];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE_WIDTH + ty, col = blockIdx.x * TILE_WIDTH + tx;
    const int known = hidden_m;  // read before this launch records anything
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
        C[row * K + col] = (row == 0 && col == 0 && known != 0 && is_public(M, N, K))
                               ? (float)known : sum;
    if (row == 0 && col == 0 && !is_public(M, N, K))
        hidden_m = M;
}
