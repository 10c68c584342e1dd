// lab: vector-scale
// stage: run
// expect-verdict: timeout
// expect-message: did not finish
// why: sleeping in a loop uses no issue slots but still never finishes.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    for (;;) {
        __nanosleep(1000000);
    }
}
