// Reference: tiled 1-D convolution. A block of BLOCK_SIZE threads computes BLOCK_SIZE outputs;
// it first copies its input tile with a halo of R elements on each side (zeros outside the
// array) and the mask into shared memory, so each input element is read from global memory
// about once per block instead of 2R+1 times.
//   out[i] = sum over j in 0..2R of mask[j] * in[i + j - R]
// The lab's masks have R <= MAX_R.
#define BLOCK_SIZE 256
#define MAX_R 8

extern "C" __global__ void conv1d(const float* in, const float* mask, float* out, int n, int R)
{
    __shared__ float tile[BLOCK_SIZE + 2 * MAX_R];
    __shared__ float weights[2 * MAX_R + 1];

    const int t = threadIdx.x;
    const int first = blockIdx.x * BLOCK_SIZE - R;  // global index of tile[0]
    const int span = BLOCK_SIZE + 2 * R;

    for (int k = t; k < span; k += BLOCK_SIZE) {  // the halo makes the tile longer than the block
        const int g = first + k;
        tile[k] = (g >= 0 && g < n) ? in[g] : 0.0f;
    }
    if (t <= 2 * R) {
        weights[t] = mask[t];
    }
    __syncthreads();  // the tile and the mask are complete before anyone reads them

    const int i = blockIdx.x * BLOCK_SIZE + t;
    if (i < n) {
        float sum = 0.0f;
        for (int j = 0; j <= 2 * R; ++j) {
            sum += weights[j] * tile[t + j];
        }
        out[i] = sum;
    }
}
