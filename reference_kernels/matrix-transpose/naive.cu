// Reference: each thread copies its elements straight from in to out. Reads of a row of in
// are coalesced; writes go down a column of out, `rows` elements apart, which is what makes
// this kernel slow. The block is TILE_DIM x BLOCK_ROWS threads over a TILE_DIM x TILE_DIM tile.
#define TILE_DIM 32
#define BLOCK_ROWS 8

extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols)
{
    const int c = blockIdx.x * TILE_DIM + threadIdx.x;
    const int r0 = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
        const int r = r0 + j;
        if (r < rows && c < cols) {
            out[c * rows + r] = in[r * cols + c];
        }
    }
}
