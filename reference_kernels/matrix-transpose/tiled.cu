// Reference: the block reads a TILE_DIM x TILE_DIM tile of in row by row into shared memory,
// waits, then writes the tile's transpose to out row by row, so both global accesses are
// coalesced. The tile has one extra column: the column reads of the second loop then fall
// in different shared-memory banks.
#define TILE_DIM 32
#define BLOCK_ROWS 8

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
    __syncthreads();  // the whole tile is loaded before any thread reads another's element

    // Block (bx, by) of in becomes block (by, bx) of out.
    c = blockIdx.y * TILE_DIM + threadIdx.x;  // a column of out is a row of in
    r = blockIdx.x * TILE_DIM + threadIdx.y;  // a row of out is a column of in
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
        if (r + j < cols && c < rows) {
            out[(r + j) * rows + c] = tile[threadIdx.x][threadIdx.y + j];
        }
    }
}
