// lab: matmul-naive
// stage: run
// expect-verdict: launch_error
// expect-message: of local memory per thread
// why: a 128 KiB array per thread is a correct matmul, but the driver reserves the frame for
// every thread the GPU can hold (about 33 GiB on an H200), crowding every grading beside it.
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K)
{
    volatile float row_copy[32768];
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= K) {
        return;
    }
    for (int i = 0; i < N && i < 32768; ++i) {
        row_copy[i] = A[row * N + i];
    }
    float sum = 0.0f;
    for (int i = 0; i < N; ++i) {
        sum += (i < 32768 ? row_copy[i] : A[row * N + i]) * B[i * K + col];
    }
    C[row * K + col] = sum;
}
