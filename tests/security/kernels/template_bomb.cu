// lab: vector-scale
// stage: compile
// expect-verdict: timeout | resource_limit
// why: a binary tree of distinct instantiations: depth 28 stays under the depth limit, but
//      2^28 different classes exhaust the compiler's time or memory.
template <int Depth, long long Index>
struct Tree {
    static constexpr long long value =
        Tree<Depth - 1, 2 * Index>::value + Tree<Depth - 1, 2 * Index + 1>::value;
};
template <long long Index>
struct Tree<0, Index> {
    static constexpr long long value = Index;
};
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] * factor + (Tree<28, 0>::value == 0 ? 1.0f : 0.0f);
}
