// expect-profile: bank_conflicts
// expect-line: 26
// why: The tile is 32 x 32 floats with no padding column, so reading a column of it (tile[threadIdx.x][...]) sends all 32 threads of a warp to the same shared-memory bank: a 32-way bank conflict, each read served in 32 turns. The tiled reference's tile[32][33] spreads a column over all 32 banks.
#define TILE_DIM 32
#define BLOCK_ROWS 8

extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TILE_DIM][TILE_DIM];  // no padding column: see the header

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
            // A column of the tile: the threads of a warp read words 32 floats apart, which
            // all fall in one bank.
            out[(r + j) * rows + c] = tile[threadIdx.x][threadIdx.y + j];
        }
    }
}
