// expect-profile: uncoalesced_global
// expect-line: 18
// why: Neighbouring threads (threadIdx.x) take neighbouring rows of in, so each warp writes a row of out in one piece but reads a column of in, cols floats apart: of each 32-byte sector it reads it uses 4 bytes. The tiled reference reads and writes whole rows through shared memory.
#define TILE_DIM 32
#define BLOCK_ROWS 8

extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols)
{
    // The block's tile covers columns blockIdx.x * TILE_DIM .. and rows blockIdx.y * TILE_DIM ..
    // of in, as the lab's grid lays it out; inside it, threadIdx.x walks down the rows.
    const int r = blockIdx.y * TILE_DIM + threadIdx.x;
    const int c0 = blockIdx.x * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
        const int c = c0 + j;
        if (r < rows && c < cols) {
            // out[c][r]: neighbouring threads write neighbouring floats (coalesced);
            // in[r][c]: neighbouring threads read floats `cols` apart (strided).
            out[c * rows + r] = in[r * cols + c];
        }
    }
}
