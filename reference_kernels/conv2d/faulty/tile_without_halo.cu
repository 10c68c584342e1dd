// expect-verdict: wrong_answer
// expect-fail-case: 1023x1023-r3
// expect-pass-case: 1x1-r1
// why: The shared tile holds only the block's own TILE_WIDTH x TILE_WIDTH pixels, no halo, and window pixels outside the tile are taken as 0: outputs near every tile edge miss their neighbours in the next tile. Only an image that fits in one tile (1 x 1) comes out right.
#define TILE_WIDTH 16

extern "C" __global__ void conv2d(const float* in, const float* mask, float* out, int H, int W,
                                  int R)
{
    __shared__ float tile[TILE_WIDTH][TILE_WIDTH];
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int x = blockIdx.x * TILE_WIDTH + tx;
    const int y = blockIdx.y * TILE_WIDTH + ty;

    tile[ty][tx] = (x < W && y < H) ? in[y * W + x] : 0.0f;
    __syncthreads();

    if (x < W && y < H) {
        const int side = 2 * R + 1;
        float sum = 0.0f;
        for (int i = -R; i <= R; ++i) {
            for (int j = -R; j <= R; ++j) {
                const int r = ty + i;
                const int c = tx + j;
                if (r >= 0 && r < TILE_WIDTH && c >= 0 && c < TILE_WIDTH) {
                    sum += mask[(i + R) * side + (j + R)] * tile[r][c];
                }
            }
        }
        out[y * W + x] = sum;
    }
}
