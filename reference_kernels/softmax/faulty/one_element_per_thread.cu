// expect-verdict: wrong_answer
// expect-fail-case: row-1x1000
// expect-pass-case: column-1000x1
// why: Each thread handles only the element at its own index, as if a row never had more elements than the block has threads. With 1000 columns and 256 threads, three quarters of each row are never read (the maximum and sum are wrong) and never written. A row of one element is right.
#include <float.h>

extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols)
{
    extern __shared__ float buf[];
    const int t = threadIdx.x;
    const float* in = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;

    const float v = t < cols ? in[t] : -FLT_MAX;  // should loop over c = t, t + blockDim.x, ...
    buf[t] = v;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half) {
            buf[t] = fmaxf(buf[t], buf[t + half]);
        }
        __syncthreads();
    }
    const float m = buf[0];
    __syncthreads();

    const float e = t < cols ? expf(v - m) : 0.0f;
    buf[t] = e;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half) {
            buf[t] += buf[t + half];
        }
        __syncthreads();
    }
    if (t < cols) {
        out[t] = e / buf[0];
    }
}
