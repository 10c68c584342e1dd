// lab: vector-scale
// stage: compile
// expect-verdict: ok
// expect-message: this `return` runs only for some threads
// why: an early return before a barrier, the index initialised in braces (`unsigned i{...}`):
//      it got no barrier warning, where `unsigned i = ...` got one.
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    __shared__ float staged[1024];
    unsigned i{blockIdx.x * blockDim.x + threadIdx.x};
    if (i >= n) return;
    staged[threadIdx.x] = src[i];
    __syncthreads();
    dst[i] = staged[threadIdx.x] * factor;
}
