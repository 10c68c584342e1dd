// A cheat the timing re-check must catch: the kernel remembers the last problem size it
// finished and returns at once when launched again for the same size, so every first launch
// (the correctness run of each case) is right and every repeated (timed) launch does nothing.
__device__ int last_m = -1, last_n = -1, last_k = -1;
__device__ unsigned int blocks_done = 0;

extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ int seen;
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        seen = (last_m == M && last_n == N && last_k == K);
    }
    __syncthreads();
    if (seen) {
        return;
    }
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < K) {
        float sum = 0.0f;
        for (int i = 0; i < N; ++i) {
            sum += A[row * N + i] * B[i * K + col];
        }
        C[row * K + col] = sum;
    }
    // The last block to finish records the size: by then every block has read `last_m`.
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        __threadfence();
        unsigned int total = gridDim.x * gridDim.y;
        if (atomicAdd(&blocks_done, 1u) == total - 1) {
            last_m = M;
            last_n = N;
            last_k = K;
            blocks_done = 0;
            __threadfence();
        }
    }
}
