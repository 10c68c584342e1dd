// expect-verdict: wrong_answer
// expect-fail-case: n-1000-r3
// why: The mask is applied flipped (mask[2R - j] instead of mask[j]), the textbook definition of convolution; the lab's convolution, like a CNN layer, applies the mask as stored, and the page says so. With a random mask every output differs.
extern "C" __global__ void conv1d(const float* in, const float* mask, float* out, int n, int R)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float sum = 0.0f;
        for (int j = 0; j <= 2 * R; ++j) {
            const int k = i + j - R;
            if (k >= 0 && k < n) {
                sum += mask[2 * R - j] * in[k];
            }
        }
        out[i] = sum;
    }
}
