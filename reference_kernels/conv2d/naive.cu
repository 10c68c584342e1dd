// Reference: one thread per output pixel, reading its (2R+1) x (2R+1) window straight from
// global memory. Pixels outside the image count as 0 (zero padding):
//   out[y][x] = sum over i, j in -R..R of mask[i + R][j + R] * in[y + i][x + j]
extern "C" __global__ void conv2d(const float* in, const float* mask, float* out, int H, int W,
                                  int R)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= W || y >= H) {
        return;  // the grid is rounded up to whole blocks
    }
    const int side = 2 * R + 1;
    float sum = 0.0f;
    for (int i = -R; i <= R; ++i) {
        const int yy = y + i;
        if (yy < 0 || yy >= H) {
            continue;
        }
        for (int j = -R; j <= R; ++j) {
            const int xx = x + j;
            if (xx >= 0 && xx < W) {
                sum += mask[(i + R) * side + (j + R)] * in[yy * W + xx];
            }
        }
    }
    out[y * W + x] = sum;
}
