// lab: vector-scale
// stage: run
// expect-verdict: pass
// expect-warnings: 0
// why: the block keeps going round while any of its threads still has an element:
//      `__syncthreads_or(i < n)` is the same value in every thread of the block by definition,
//      so every thread reaches both barriers in the body. The grader read `i < n` inside the
//      condition as thread-dependent and warned of a barrier problem twice (issue 34, case 5).
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    __shared__ float staged[1024];
    const unsigned int t = threadIdx.x;
    const unsigned int stride = blockDim.x * gridDim.x;
    unsigned int i = blockIdx.x * blockDim.x + t;
    while (__syncthreads_or(i < n)) {
        staged[t] = i < n ? src[i] : 0.0f;
        __syncthreads();  // the block's values are staged
        // Each thread scales its neighbour's value into the neighbour's place.
        const unsigned int u = (t + 1) % blockDim.x;
        const unsigned int j = i - t + u;
        if (j < n) {
            dst[j] = staged[u] * factor;
        }
        __syncthreads();  // every read of `staged` is done before the next round overwrites it
        i += stride;
    }
}
