// lab: matmul-tiled
// stage: run
// expect-verdict: timeout
// expect-message: under compute-sanitizer
// sanitizer: on
// why: times a loop of shared-memory accesses and barriers with clock64(); under the sanitizer's instrumentation it runs hundreds of times slower, and then the kernel spins for ever. It used to cost minutes of GPU time and keep full marks, since sanitizer runs changed no score.
#define TILE_WIDTH 16

extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float tileA[TILE_WIDTH][TILE_WIDTH];
    __shared__ float tileB[TILE_WIDTH][TILE_WIDTH];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE_WIDTH + ty, col = blockIdx.x * TILE_WIDTH + tx;
    long long start = clock64();
    float probe = 0.0f;
    for (int i = 0; i < 64; ++i) {
        tileA[ty][tx] = (float)i;
        __syncthreads();
        probe += tileA[(ty + 1) % TILE_WIDTH][tx];
        __syncthreads();
    }
    if (clock64() - start > 2000000) {  // about a millisecond: never without instrumentation
        while (clock64() - start >= 0) { __nanosleep(1000); }
    }
    float sum = probe * 0.0f;
    for (int p = 0; p < (N + TILE_WIDTH - 1) / TILE_WIDTH; ++p) {
        tileA[ty][tx] = (row < M && p * TILE_WIDTH + tx < N) ? A[row * N + p * TILE_WIDTH + tx] : 0.0f;
        tileB[ty][tx] = (p * TILE_WIDTH + ty < N && col < K) ? B[(p * TILE_WIDTH + ty) * K + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE_WIDTH; ++k) sum += tileA[ty][k] * tileB[k][tx];
        __syncthreads();
    }
    if (row < M && col < K) C[row * K + col] = sum;
}
