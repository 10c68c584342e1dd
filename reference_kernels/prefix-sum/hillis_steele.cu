// Reference: the textbook Hillis-Steele block scan in shared memory. In round k every element
// adds the one 2^k places before it; two buffers take turns, so no thread reads a value
// another thread is overwriting in the same round. log2(1024) = 10 rounds, a barrier each.
__device__ int block_scan(int v, int* buf, int* total)
{
    unsigned int current = 0;  // which half of buf holds the values of the current round
    buf[threadIdx.x] = v;
    __syncthreads();
    for (unsigned int offset = 1; offset < blockDim.x; offset *= 2) {
        const int* src = buf + current * blockDim.x;
        int sum = src[threadIdx.x];
        if (threadIdx.x >= offset) {
            sum += src[threadIdx.x - offset];
        }
        buf[(1 - current) * blockDim.x + threadIdx.x] = sum;
        __syncthreads();  // this round is written before the next one reads it
        current = 1 - current;
    }
    v = buf[current * blockDim.x + threadIdx.x];
    *total = buf[current * blockDim.x + blockDim.x - 1];
    __syncthreads();  // everyone has read the result before the buffers are used again
    return v;
}

extern "C" __global__ void scan_blocks(const int* in, int* out, int* block_sums, unsigned int n)
{
    __shared__ int buf[2 * 1024];
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    int total;
    const int v = block_scan(i < n ? in[i] : 0, buf, &total);
    if (i < n) {
        out[i] = v;
    }
    if (threadIdx.x == 0) {
        block_sums[blockIdx.x] = total;
    }
}

extern "C" __global__ void scan_block_sums(int* block_sums, unsigned int nblocks)
{
    __shared__ int buf[2 * 1024];
    int carry = 0;
    for (unsigned int base = 0; base < nblocks; base += blockDim.x) {
        const unsigned int i = base + threadIdx.x;
        int total;
        const int v = block_scan(i < nblocks ? block_sums[i] : 0, buf, &total);
        if (i < nblocks) {
            block_sums[i] = v + carry;
        }
        carry += total;
    }
}

extern "C" __global__ void add_block_offsets(int* out, const int* block_sums, unsigned int n)
{
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (blockIdx.x > 0 && i < n) {
        out[i] += block_sums[blockIdx.x - 1];
    }
}
