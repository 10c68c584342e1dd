// expect-verdict: wrong_answer
// expect-fail-case: square-1023
// expect-pass-case: square-1024
// expect-message: elements of C are wrong
// why: Lab 14-2's tiled kernel loops `tile < N / TILE_SIZE` and loads without bounds checks, so the last, partial tile is never added: right when every size is a multiple of 32, wrong at 1023. (Only the final store is guarded here, so the failure is a wrong answer rather than a write past C.)
#define TILE_SIZE 32

extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int tx = threadIdx.x;
    int ty = threadIdx.y;

    __shared__ float s_a[TILE_SIZE][TILE_SIZE];
    __shared__ float s_b[TILE_SIZE][TILE_SIZE];

    float tmp = 0.0f;
    for (int tile = 0; tile < N / TILE_SIZE; tile++) {
        s_a[ty][tx] = A[row * N + tile * TILE_SIZE + tx];
        s_b[ty][tx] = B[(tile * TILE_SIZE + ty) * K + col];
        __syncthreads();
        for (int j = 0; j < TILE_SIZE; j++) {
            tmp += s_a[ty][j] * s_b[j][tx];
        }
        __syncthreads();
    }
    if (row < M && col < K) {
        C[row * K + col] = tmp;
    }
}
