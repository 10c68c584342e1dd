// expect-verdict: wrong_answer
// expect-fail-case: square-1023
// expect-pass-case: square-1024
// expect-finding: divergent_barrier
// why: Seed 004's tiled kernel puts the whole tile loop, barriers included, inside `if (Row < m && Col < k)`. Threads outside C skip the barriers and never load their share of the tiles, so in the edge blocks the threads inside C read tile elements nobody wrote. With T = 32 it is right when M and K are multiples of 32 (no thread is outside C) and wrong at 1023.
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int m, int n, int k)
{
#define T 32
    __shared__ float ds_A[T][T];
    __shared__ float ds_B[T][T];

    int Row = blockIdx.y * T + threadIdx.y;
    int Col = blockIdx.x * T + threadIdx.x;
    int tx = threadIdx.x;
    int ty = threadIdx.y;

    float c = 0.0f;

    if ((Row < m) && (Col < k)) {
        for (int t = 0; t < n / T + 1; t++) {
            if ((Row < m) && (t * T + tx < n))
                ds_A[ty][tx] = A[Row * n + t * T + tx];
            else
                ds_A[ty][tx] = 0.0f;
            if ((t * T + ty < n) && (Col < k))
                ds_B[ty][tx] = B[(t * T + ty) * k + Col];
            else
                ds_B[ty][tx] = 0.0f;
            __syncthreads();
            for (int i = 0; i < T; i++) {
                c += ds_A[ty][i] * ds_B[i][tx];
            }
            __syncthreads();
        }
        C[Row * k + Col] = c;
    }
}
