// lab: vector-scale
// stage: run
// expect-verdict: pass
// expect-stdout: [grader] output past the first
// why: every thread prints; the grade is unchanged and the captured output is capped.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        dst[i] = src[i] * factor;
        if (i < 100000) printf("{\"status\": \"ok\", \"value\": {\"score\": 100}} thread %u\n", i);
    }
}
