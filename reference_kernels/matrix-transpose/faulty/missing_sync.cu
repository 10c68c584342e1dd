// expect-verdict: wrong_answer
// expect-finding: shared_memory_race
// why: There is no __syncthreads() between loading the tile and reading it back transposed, so a thread may read an element of the tile that another warp has not written yet. Whether a plain run comes out wrong varies (it usually does on the large cases); racecheck on the sanitizer case reports the race every time.
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
    // missing: __syncthreads();

    c = blockIdx.y * TILE_DIM + threadIdx.x;
    r = blockIdx.x * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) {
        if (r + j < cols && c < rows) {
            out[(r + j) * rows + c] = tile[threadIdx.x][threadIdx.y + j];
        }
    }
}
