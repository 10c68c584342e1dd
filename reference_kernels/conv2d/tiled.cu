// Reference: tiled 2-D convolution. A block of TILE_WIDTH x TILE_WIDTH threads computes a
// TILE_WIDTH x TILE_WIDTH tile of out; it first copies the input tile plus a halo of R pixels
// on every side (zeros outside the image) and the mask into shared memory, so each input
// pixel is read from global memory about once per block instead of (2R+1)^2 times.
//   out[y][x] = sum over i, j in -R..R of mask[i + R][j + R] * in[y + i][x + j]
// The lab's masks have R <= MAX_R.
#define TILE_WIDTH 16
#define MAX_R 3

extern "C" __global__ void conv2d(const float* in, const float* mask, float* out, int H, int W,
                                  int R)
{
    __shared__ float tile[TILE_WIDTH + 2 * MAX_R][TILE_WIDTH + 2 * MAX_R];
    __shared__ float weights[(2 * MAX_R + 1) * (2 * MAX_R + 1)];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int x0 = blockIdx.x * TILE_WIDTH;  // the block's first output column
    const int y0 = blockIdx.y * TILE_WIDTH;  // and row
    const int side = 2 * R + 1;
    const int span = TILE_WIDTH + 2 * R;  // the input tile with its halo

    for (int k = ty * TILE_WIDTH + tx; k < side * side; k += TILE_WIDTH * TILE_WIDTH) {
        weights[k] = mask[k];
    }
    // The halo makes the input tile larger than the block: each thread copies several pixels.
    for (int r = ty; r < span; r += TILE_WIDTH) {
        const int yy = y0 - R + r;
        for (int c = tx; c < span; c += TILE_WIDTH) {
            const int xx = x0 - R + c;
            tile[r][c] = (yy >= 0 && yy < H && xx >= 0 && xx < W) ? in[yy * W + xx] : 0.0f;
        }
    }
    __syncthreads();  // the tile and the mask are complete before anyone reads them

    const int x = x0 + tx;
    const int y = y0 + ty;
    if (x < W && y < H) {
        float sum = 0.0f;
        for (int i = 0; i < side; ++i) {
            for (int j = 0; j < side; ++j) {
                sum += weights[i * side + j] * tile[ty + i][tx + j];
            }
        }
        out[y * W + x] = sum;
    }
}
