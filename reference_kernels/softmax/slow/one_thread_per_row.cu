// expect-profile: uncoalesced_global
// expect-line: 20
// why: One thread does a whole row, so at each step the 32 threads of a warp read 32 different rows, cols floats apart: of each 32-byte sector a warp reads it uses 4 bytes. Only rows threads work at all (the rest of the lab's grid exits at once). The references give a row to a block, whose threads read neighbouring elements together.
#include <float.h>

extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols)
{
    // The lab launches a block per row; this kernel uses only the first `rows` threads of the
    // grid, one per row, and lets the rest exit.
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) {
        return;
    }
    const float* in = x + (size_t)r * cols;
    float* out = y + (size_t)r * cols;

    float m = -FLT_MAX;
    for (int c = 0; c < cols; ++c) {
        // Neighbouring threads read elements a whole row apart.
        m = fmaxf(m, in[c]);
    }
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) {
        s += expf(in[c] - m);
    }
    for (int c = 0; c < cols; ++c) {
        out[c] = expf(in[c] - m) / s;
    }
}
