// expect-verdict: wrong_answer
// expect-fail-case: negative-256x999
// expect-pass-case: row-1x1000
// why: The running maximum starts at 0.0f instead of the lowest float. When a row holds a positive value that does not matter; when every value is near -120, the "maximum" stays 0, expf(x - 0) underflows to 0 for every element, and 0 / 0 is NaN.
__device__ float block_reduce(float v, float* buf, bool take_max)
{
    const int t = threadIdx.x;
    buf[t] = v;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half) {
            buf[t] = take_max ? fmaxf(buf[t], buf[t + half]) : buf[t] + buf[t + half];
        }
        __syncthreads();
    }
    v = buf[0];
    __syncthreads();
    return v;
}

extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols)
{
    extern __shared__ float buf[];
    const float* in = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;

    float m = 0.0f;  // should be -FLT_MAX
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        m = fmaxf(m, in[c]);
    }
    m = block_reduce(m, buf, true);

    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        s += expf(in[c] - m);
    }
    s = block_reduce(s, buf, false);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        out[c] = expf(in[c] - m) / s;
    }
}
