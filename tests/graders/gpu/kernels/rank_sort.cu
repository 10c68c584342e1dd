// Sorts by rank: element i goes to the number of elements before it in sorted order (smaller
// ones, and equal ones at lower indices). n^2 work, fine for the small cases of the test.
extern "C" __global__ void rank_sort(const int* keys, int* out, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    const int v = keys[i];
    int rank = 0;
    for (int j = 0; j < n; ++j) {
        const int w = keys[j];
        rank += (w < v) || (w == v && j < i);
    }
    out[SORTED ? rank : i] = v;
}
