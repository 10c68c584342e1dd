// expect-verdict: out_of_bounds_write
// expect-fail-case: rect-31x33
// expect-pass-case: square-1024
// why: The tiled kernel loads and stores whole tiles without checking the matrix's edges. When both sizes are multiples of the tile (1024 x 1024) that is right; for 31 x 33 the partial tiles read past in and write past the end of out.
#define TILE_DIM 32
#define BLOCK_ROWS 8

extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];

    int c = blockIdx.x * TILE_DIM + threadIdx.x;
    int r = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
        tile[threadIdx.y + j][threadIdx.x] = in[(r + j) * cols + c];  // no check against rows, cols
    }
    __syncthreads();

    c = blockIdx.y * TILE_DIM + threadIdx.x;
    r = blockIdx.x * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
        out[(r + j) * rows + c] = tile[threadIdx.x][threadIdx.y + j];  // nor here
    }
}
