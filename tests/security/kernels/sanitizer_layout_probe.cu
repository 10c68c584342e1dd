// lab: matmul-tiled
// stage: run
// expect-verdict: pass
// sanitizer: on
// test: dedicated (tests/security/test_sanitizer_layout_gpu.py)
// why: prints how far apart its arrays lie (B - A, C - B, in bytes) and reads one element past the end of A only when the distance matches the old graded layout (guard bands of 64 KiB in one pooled allocation); under the sanitizer the arrays lay elsewhere, so it read out of bounds only where no tool watched.
#define TILE_WIDTH 16

extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float tileA[TILE_WIDTH][TILE_WIDTH];
    __shared__ float tileB[TILE_WIDTH][TILE_WIDTH];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE_WIDTH + ty, col = blockIdx.x * TILE_WIDTH + tx;
    const long long ab = (const char*)B - (const char*)A;
    const long long bc = (const char*)C - (const char*)B;
    const long long a_bytes = (long long)M * N * 4;
    const long long old_graded = ((a_bytes + 2 * 65536 + 511) / 512) * 512;
    float extra = 0.0f;
    if (ab == old_graded && row == 0 && col == 0)
        extra = A[M * N] * 0.0f;  // one element past A: in a guard band then, poison * 0 = NaN
    if (blockIdx.x == 0 && blockIdx.y == 0 && tx == 0 && ty == 0)
        printf("layout ab=%lld bc=%lld\n", ab, bc);
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
        C[row * K + col] = sum + (extra == extra ? extra : 0.0f);
}
