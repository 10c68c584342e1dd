// Reference: one thread per output element, reading its 2R+1 neighbours straight from global
// memory; elements outside the array count as 0 (zero padding):
//   out[i] = sum over j in 0..2R of mask[j] * in[i + j - R]
extern "C" __global__ void conv1d(const float* in, const float* mask, float* out, int n, int R)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;  // the grid is rounded up to whole blocks
    }
    float sum = 0.0f;
    for (int j = 0; j <= 2 * R; ++j) {
        const int k = i + j - R;
        if (k >= 0 && k < n) {
            sum += mask[j] * in[k];
        }
    }
    out[i] = sum;
}
