// lab: vector-scale
// stage: run
// expect-verdict: timeout
// expect-message: did not finish
// why: allocates from the device heap in a loop and never frees; once the heap is empty it keeps asking.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    for (;;) {
        float* p = static_cast<float*>(malloc(1 << 16));
        if (p != nullptr) p[0] = factor;
    }
}
