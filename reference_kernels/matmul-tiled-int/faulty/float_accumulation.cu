// expect-verdict: wrong_answer
// expect-fail-case: square-1023
// expect-pass-case: square-64
// why: The running sum is a float. A float holds every integer only up to 2^24 = 16777216; on the large cases many partial sums pass that and odd products get rounded away, so the integer result is off by a few units. On square-64 the sums stay far below 2^24 and the answer is exact.
#define TILE_WIDTH 32

extern "C" __global__ void matmul(const int* A, const int* B, int* C, int M, int N, int K)
{
    __shared__ int tileA[TILE_WIDTH][TILE_WIDTH];
    __shared__ int tileB[TILE_WIDTH][TILE_WIDTH];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * TILE_WIDTH + ty;
    const int col = blockIdx.x * TILE_WIDTH + tx;

    float sum = 0.0f;  // should be int
    for (int p = 0; p < (N + TILE_WIDTH - 1) / TILE_WIDTH; ++p) {
        const int aCol = p * TILE_WIDTH + tx;
        const int bRow = p * TILE_WIDTH + ty;
        tileA[ty][tx] = (row < M && aCol < N) ? A[row * N + aCol] : 0;
        tileB[ty][tx] = (bRow < N && col < K) ? B[bRow * K + col] : 0;
        __syncthreads();
        for (int k = 0; k < TILE_WIDTH; ++k) {
            sum += tileA[ty][k] * tileB[k][tx];
        }
        __syncthreads();
    }
    if (row < M && col < K) {
        C[row * K + col] = (int)sum;
    }
}
