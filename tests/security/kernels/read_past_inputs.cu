// lab: vector-scale
// stage: run
// expect-verdict: wrong_answer
// why: hunts the memory after src for the expected value; it is not on the device, so the kernel writes what it found instead.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float wanted = src[i] * factor;
    float found = -7.0f;
    // Only the guard bands around src (64 KiB each) are read: far enough to find a neighbouring buffer,
    // near enough not to fault.
    for (unsigned int j = 0; j < 4096; ++j) {
        float after = src[n + j];
        float before = *(src - 1 - (long long)j);
        if (after == wanted || before == wanted) {
            found = wanted;
            break;
        }
    }
    dst[i] = found;
}
