// Reference: one block per row, the block-wide maximum and sum taken by a pairwise tree in
// the dynamic shared memory the lab passes (one float per thread). Needs a power-of-two block.
#include <float.h>

extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols)
{
    extern __shared__ float buf[];
    const int t = threadIdx.x;
    const float* in = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;

    float m = -FLT_MAX;
    for (int c = t; c < cols; c += blockDim.x) {
        m = fmaxf(m, in[c]);
    }
    buf[t] = m;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half) {
            buf[t] = fmaxf(buf[t], buf[t + half]);
        }
        __syncthreads();
    }
    m = buf[0];
    __syncthreads();  // all have read the maximum before buf holds sums

    float s = 0.0f;
    for (int c = t; c < cols; c += blockDim.x) {
        s += expf(in[c] - m);
    }
    buf[t] = s;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half) {
            buf[t] += buf[t + half];
        }
        __syncthreads();
    }
    s = buf[0];

    for (int c = t; c < cols; c += blockDim.x) {
        out[c] = expf(in[c] - m) / s;
    }
}
