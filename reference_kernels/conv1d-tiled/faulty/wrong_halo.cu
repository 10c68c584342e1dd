// expect-verdict: wrong_answer
// expect-fail-case: n-1000-r3
// expect-pass-case: n-1-r1
// why: The shared tile holds only the block's own BLOCK_SIZE elements, without the R-element halos, and neighbours outside the tile are taken as 0 as if they were outside the array: outputs within R of each block's edge miss the neighbouring block's elements. With one element (n = 1) there is no neighbouring block and it is right.
#define BLOCK_SIZE 256

extern "C" __global__ void conv1d(const float* in, const float* mask, float* out, int n, int R)
{
    __shared__ float tile[BLOCK_SIZE];
    const int t = threadIdx.x;
    const int i = blockIdx.x * BLOCK_SIZE + t;

    tile[t] = i < n ? in[i] : 0.0f;
    __syncthreads();

    if (i < n) {
        float sum = 0.0f;
        for (int j = 0; j <= 2 * R; ++j) {
            const int k = t + j - R;
            if (k >= 0 && k < BLOCK_SIZE) {  // should reach into the neighbours' elements
                sum += mask[j] * tile[k];
            }
        }
        out[i] = sum;
    }
}
