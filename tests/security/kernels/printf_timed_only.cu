// lab: vector-scale
// stage: run
// expect-verdict: output_limit | timeout
// expect-message: print
// timing: on
// why: correct, and quiet while its cases are judged; from the fourth launch of the large case on (the timed repetitions) every thread prints. A flood only in timed launches held a worker past 260 s; now the timed section stops at its own budget (or the child once it has printed a few MiB, whichever comes first), the timed case's verdict names the printing, and no one is told the GPU is unwell.
__device__ unsigned int large_launches = 0;

extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor;
    if (n > 1000000 && i < n) {
        if (large_launches >= 4) printf("timed launch, thread %u: a flood only the timed repetitions see\n", i);
        if (i == 0) atomicAdd(&large_launches, 1u);
    }
}
