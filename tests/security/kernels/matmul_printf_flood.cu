// lab: matmul-tiled
// stage: run
// expect-verdict: output_limit
// expect-message: stopped for printing
// why: the tiled kernel, correct, but on the ragged 63 x 65 x 70 case 32 threads print with a field width of a billion: gigabytes of spaces for the host to write. The child is stopped once it has printed a few MiB, the case's verdict says so, and the worker goes on.
#define TILE_WIDTH 32

extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float tileA[TILE_WIDTH][TILE_WIDTH];
    __shared__ float tileB[TILE_WIDTH][TILE_WIDTH];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE_WIDTH + ty, col = blockIdx.x * TILE_WIDTH + tx;
    float sum = 0.0f;
    for (int p = 0; p < (N + TILE_WIDTH - 1) / TILE_WIDTH; ++p) {
        tileA[ty][tx] = (row < M && p * TILE_WIDTH + tx < N) ? A[row * N + p * TILE_WIDTH + tx] : 0.0f;
        tileB[ty][tx] = (p * TILE_WIDTH + ty < N && col < K) ? B[(p * TILE_WIDTH + ty) * K + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE_WIDTH; ++k) sum += tileA[ty][k] * tileB[k][tx];
        __syncthreads();
    }
    if (row < M && col < K) C[row * K + col] = sum;
    if (M == 63 && row == 0 && col < 32) printf("%1000000000d\n", col);
}
