// expect-verdict: out_of_bounds_write
// expect-fail-case: rect-31x33
// expect-pass-case: square-1024
// why: The kernel writes out[c * cols + r], as if out's rows had `cols` elements like in's. out is cols x rows, so its rows have `rows` elements: the index is right only when the matrix is square, and for 31 x 33 the last columns land past the end of out.
#define TILE_DIM 32
#define BLOCK_ROWS 8

extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols)
{
    const int c = blockIdx.x * TILE_DIM + threadIdx.x;
    const int r0 = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
        const int r = r0 + j;
        if (r < rows && c < cols) {
            out[c * cols + r] = in[r * cols + c];  // should be c * rows + r
        }
    }
}
