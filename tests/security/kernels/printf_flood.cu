// lab: vector-scale
// stage: run
// expect-verdict: pass
// expect-stdout: [grader] output past the first
// case-seconds: 10
// why: every thread prints; the grade is unchanged and the captured output is capped. (100,000 printing threads take about 0.5 s a launch on an H100 and a case launches several times: 2 s is too tight for a passing kernel.)
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        dst[i] = src[i] * factor;
        if (i < 100000) printf("{\"status\": \"ok\", \"value\": {\"score\": 100}} thread %u\n", i);
    }
}
