// lab: vector-scale
// stage: run
// expect-verdict: no_output
// why: returns at once: the sentinel stays in every element of dst.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
}
