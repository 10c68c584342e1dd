"""The few headers a submission may include, served from memory (never from the disk).

NVRTC builds in printf, the math functions, atomics and the CUDA built-ins, but none of the
macros students take from the C headers: `INFINITY`, `NAN`, `M_PI`, `FLT_MAX`, `DBL_MAX`,
`INT_MAX`, `UINT32_MAX`, ... These texts define them (each guarded, so including two headers,
or defining one yourself, is fine). NVRTC has no `__builtin_inff`; `1.0f / 0.0f` is a
constant it folds to infinity in every context (a kernel, `constexpr`, a `__device__`
initializer), and `0.0f / 0.0f` to a NaN. `cuda_runtime.h` gives the math macros too, as
nvcc's does (it includes math.h).
"""

from __future__ import annotations


def _defines(pairs: list[tuple[str, str]]) -> str:
    return "".join(f"#ifndef {name}\n#define {name} {value}\n#endif\n" for name, value in pairs)


_MATH = _defines(
    [
        ("INFINITY", "(1.0f / 0.0f)"),
        ("NAN", "(0.0f / 0.0f)"),
        ("HUGE_VALF", "(1.0f / 0.0f)"),
        ("HUGE_VAL", "(1.0 / 0.0)"),
        ("MAXFLOAT", "3.40282347e+38F"),
        ("M_E", "2.7182818284590452354"),
        ("M_LOG2E", "1.4426950408889634074"),
        ("M_LOG10E", "0.43429448190325182765"),
        ("M_LN2", "0.69314718055994530942"),
        ("M_LN10", "2.30258509299404568402"),
        ("M_PI", "3.14159265358979323846"),
        ("M_PI_2", "1.57079632679489661923"),
        ("M_PI_4", "0.78539816339744830962"),
        ("M_1_PI", "0.31830988618379067154"),
        ("M_2_PI", "0.63661977236758134308"),
        ("M_2_SQRTPI", "1.12837916709551257390"),
        ("M_SQRT2", "1.41421356237309504880"),
        ("M_SQRT1_2", "0.70710678118654752440"),
    ]
)
_FLOAT = _defines(
    [
        ("FLT_RADIX", "2"),
        ("FLT_MANT_DIG", "24"),
        ("DBL_MANT_DIG", "53"),
        ("FLT_DIG", "6"),
        ("DBL_DIG", "15"),
        ("FLT_MIN_EXP", "(-125)"),
        ("DBL_MIN_EXP", "(-1021)"),
        ("FLT_MAX_EXP", "128"),
        ("DBL_MAX_EXP", "1024"),
        ("FLT_MAX", "3.402823466e+38F"),
        ("FLT_MIN", "1.175494351e-38F"),
        ("FLT_TRUE_MIN", "1.401298464e-45F"),
        ("FLT_EPSILON", "1.192092896e-07F"),
        ("DBL_MAX", "1.7976931348623158e+308"),
        ("DBL_MIN", "2.2250738585072014e-308"),
        ("DBL_TRUE_MIN", "4.9406564584124654e-324"),
        ("DBL_EPSILON", "2.2204460492503131e-016"),
    ]
)
_LIMITS = _defines(
    [
        ("CHAR_BIT", "8"),
        ("SCHAR_MIN", "(-128)"),
        ("SCHAR_MAX", "127"),
        ("UCHAR_MAX", "255"),
        ("CHAR_MIN", "(-128)"),
        ("CHAR_MAX", "127"),
        ("SHRT_MIN", "(-32767 - 1)"),
        ("SHRT_MAX", "32767"),
        ("USHRT_MAX", "65535"),
        ("INT_MIN", "(-2147483647 - 1)"),
        ("INT_MAX", "2147483647"),
        ("UINT_MAX", "4294967295U"),
        ("LONG_MIN", "(-9223372036854775807L - 1)"),
        ("LONG_MAX", "9223372036854775807L"),
        ("ULONG_MAX", "18446744073709551615UL"),
        ("LLONG_MIN", "(-9223372036854775807LL - 1)"),
        ("LLONG_MAX", "9223372036854775807LL"),
        ("ULLONG_MAX", "18446744073709551615ULL"),
    ]
)
_STDINT = (
    "typedef signed char int8_t; typedef short int16_t; typedef int int32_t; "
    "typedef long long int64_t; typedef unsigned char uint8_t; typedef unsigned short uint16_t; "
    "typedef unsigned int uint32_t; typedef unsigned long long uint64_t; "
    "typedef long long intptr_t; typedef unsigned long long uintptr_t;\n"
) + _defines(
    [
        ("INT8_MIN", "(-128)"),
        ("INT8_MAX", "127"),
        ("UINT8_MAX", "255"),
        ("INT16_MIN", "(-32767 - 1)"),
        ("INT16_MAX", "32767"),
        ("UINT16_MAX", "65535"),
        ("INT32_MIN", "(-2147483647 - 1)"),
        ("INT32_MAX", "2147483647"),
        ("UINT32_MAX", "4294967295U"),
        ("INT64_MIN", "(-9223372036854775807LL - 1)"),
        ("INT64_MAX", "9223372036854775807LL"),
        ("UINT64_MAX", "18446744073709551615ULL"),
        ("SIZE_MAX", "18446744073709551615UL"),
    ]
)

# Header name -> the text the grader serves for it.
BUILTIN_HEADERS: dict[str, str] = {
    "cuda_runtime.h": _MATH,
    "cuda_runtime_api.h": "",
    "cuda.h": _MATH,
    "device_launch_parameters.h": "",
    "stdio.h": "",
    "cstdio": "",
    "math.h": _MATH,
    "cmath": _MATH,
    "stdint.h": _STDINT,
    "cstdint": _STDINT,
    "float.h": _FLOAT,
    "cfloat": _FLOAT,
    "limits.h": _LIMITS,
    "climits": _LIMITS,
}
