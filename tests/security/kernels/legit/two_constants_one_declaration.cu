// lab: matrix-transpose
// stage: run
// expect-verdict: pass
// expect-declarations: TILE=32, ROWS=16
// expect-warnings: 0
// why: both launch constants in one declaration. The grader read TILE_DIM's value as
//      `32, BLOCK_ROWS = 16`, could not use it, did not see BLOCK_ROWS at all, and launched
//      32 x 8 blocks for a kernel that steps 16 rows at a time: half of every tile was never
//      written (issue 34, case 2).
constexpr int TILE_DIM = 32, BLOCK_ROWS = 16;

extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];

    int c = blockIdx.x * TILE_DIM + threadIdx.x;
    int r = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
        if (r + j < rows && c < cols) {
            tile[threadIdx.y + j][threadIdx.x] = in[(r + j) * cols + c];
        }
    }
    __syncthreads();

    c = blockIdx.y * TILE_DIM + threadIdx.x;
    r = blockIdx.x * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
        if (r + j < cols && c < rows) {
            out[(r + j) * rows + c] = tile[threadIdx.x][threadIdx.y + j];
        }
    }
}
