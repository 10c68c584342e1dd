"""Test inputs made on the GPU by a counter-based generator that has an exact NumPy twin.

Element `i` of an array is a pure function of a 64-bit key and `i`: SplitMix64's output for the
state `key + (i + 1) * 0x9E3779B97F4A7C15`. Nothing depends on the order or the number of
threads, so the device fills an array in one pass and `host_values` (NumPy, here) computes the
same bits for staff who reproduce a case from its stored seed, and for the CPU tests.

The key of an array comes from the case seed and the parameter's name (adding a parameter leaves
the others' data unchanged); a timed repetition also mixes in the grading's random nonce and the
repetition number, so every repetition gets data no kernel can predict.

Floats: `u = (bits >> 11) / 2**53` (exact), then `low + u * (high - low)` in float64 with two
separate roundings (`__dmul_rn`, `__dadd_rn` on the device, which the compiler never fuses into
an FMA; separate ufuncs in NumPy), then rounded to the dtype. The value lies in [low, high].
Integers: `low + ((bits >> 32) * range >> 32)` with range = high - low + 1 (at most 2**32).
Normal: `mean + std * z` in float64, z from the word by graders.run.normal (exact on both
sides); an integer dtype takes it rounded to nearest (ties to even) and clipped to its range.
float16 and bfloat16 take the float64 value rounded to float32, then to the dtype (nearest
even, both steps); bfloat16 is held as uint16 bits (graders.run.host_dtypes).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from graders.run import normal
from graders.run.host_dtypes import host_dtype, narrow, spec_dtype
from graders.run.normal import whole_bounds
from graders.spec import expr
from graders.spec.dtypes import INT_RANGES

GOLDEN = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1
MAX_INT_RANGE = 1 << 32
_THREADS = 256
_MAX_BLOCKS = 8192
_FLOATS = ("float32", "float64", "float16", "bfloat16")

# spec dtype -> (suffix of its device kernels, the C type stored, how a double `v` is stored,
# how a whole number `x` (long long) is stored).
_STORES: dict[str, tuple[str, str, str, str]] = {
    "float32": ("f32", "float", "(float)v", "(float)x"),
    "float64": ("f64", "double", "v", "(double)x"),
    "float16": ("f16", "unsigned short", "kg_to_f16(v)", "kg_to_f16((double)x)"),
    "bfloat16": ("bf16", "unsigned short", "kg_to_bf16(v)", "kg_to_bf16((double)x)"),
    "int32": ("i32", "int", "(int)v", "(int)x"),
    "uint32": ("u32", "unsigned int", "(unsigned int)v", "(unsigned int)x"),
    "int64": ("i64", "long long", "(long long)v", "(long long)x"),
    "uint8": ("u8", "unsigned char", "(unsigned char)v", "(unsigned char)x"),
}
_LOOP = """    for (kg_u64 i = blockIdx.x * (kg_u64)blockDim.x + threadIdx.x; i < n;
         i += (kg_u64)gridDim.x * blockDim.x) {{"""


def _kernels(s: str, t: str, store: str, store_whole: str, floats: bool) -> str:
    uniform = f"""
extern "C" __global__ void kg_uniform_{s}({t}* out, kg_u64 n, kg_u64 key, double lo, double span) {{
{_LOOP.format()}
        double u = (double)(kg_bits(key, i) >> 11) / 9007199254740992.0;
        double v = __dadd_rn(lo, __dmul_rn(u, span));
        out[i] = {store};
    }}
}}"""
    clip = "" if floats else "v = fmin(fmax(rint(v), lo), hi);"
    return (
        (uniform if floats else "")
        + f"""
extern "C" __global__ void kg_integers_{s}({t}* out, kg_u64 n, kg_u64 key, long long low,
                                           kg_u64 range) {{
{_LOOP.format()}
        kg_u64 off = ((kg_bits(key, i) >> 32) * range) >> 32;
        long long x = low + (long long)off;
        out[i] = {store_whole};
    }}
}}
extern "C" __global__ void kg_normal_{s}({t}* out, kg_u64 n, kg_u64 key, double mean,
                                         double std, double lo, double hi) {{
{_LOOP.format()}
        double v = __dadd_rn(mean, __dmul_rn(std, kg_normal_deviate(kg_bits(key, i))));
        {clip}
        out[i] = {store};
    }}
}}
"""
    )


KERNEL_SOURCE = (
    r"""
typedef unsigned long long kg_u64;
__device__ __forceinline__ kg_u64 kg_bits(kg_u64 key, kg_u64 i) {
    kg_u64 z = key + (i + 1ULL) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
__device__ __forceinline__ unsigned short kg_to_f16(double v) {
    unsigned short h;
    float f = (float)v;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ unsigned short kg_to_bf16(double v) {
    unsigned int b = __float_as_uint((float)v);
    return (unsigned short)((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}
"""
    + normal.KERNEL_SOURCE
    + "".join(
        _kernels(suffix, c_type, store, whole, dtype in _FLOATS)
        for dtype, (suffix, c_type, store, whole) in _STORES.items()
    )
)


def _field(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def stream_key(seed: int, name: str, *, nonce: int = 0, rep: int = -1) -> int:
    """The 64-bit key of one array: a case's data (rep -1) or one timed repetition's."""
    text = f"kernelgrader-inputs/{seed}/{name}" + (f"/{nonce}/{rep}" if rep >= 0 else "")
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def host_bits(key: int, n: int) -> np.ndarray:
    """The generator's raw 64-bit words for elements 0..n-1 (uint64 arithmetic wraps)."""
    i = np.arange(1, n + 1, dtype=np.uint64)
    z = np.uint64(key & _MASK) + i * np.uint64(GOLDEN)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _rule(init: Any, dtype: str, names: Mapping[str, Any]) -> tuple[str, Any, Any]:
    """('uniform', lo, span) | ('integers', low, range) | ('normal', mean, std) |
    ('constant', value, None), for the spec dtype `dtype`."""
    dist = str(_field(init, "dist", "uniform"))
    if dist in ("constant", "zeros"):
        value = 0 if dist == "zeros" else expr.evaluate(_field(init, "value", 0), names)
        return "constant", value, None
    if dist == "normal":
        mean = float(expr.evaluate(_field(init, "mean", 0), names))
        return "normal", mean, float(expr.evaluate(_field(init, "std", 1), names))
    low = expr.evaluate(_field(init, "low", 0), names)
    high = expr.evaluate(_field(init, "high", 1), names)
    if dist not in ("uniform", "integers"):
        raise ValueError(
            f"Unknown input distribution {dist!r}; use uniform, integers, normal, constant or "
            "zeros."
        )
    if dist == "integers" or dtype not in _FLOATS:
        span = int(high) - int(low) + 1
        if not 1 <= span <= MAX_INT_RANGE:
            raise ValueError(
                f"An integer input range of {span} values is not supported; low..high may span "
                f"at most {MAX_INT_RANGE} values."
            )
        return "integers", int(low), span
    return "uniform", float(low), float(high) - float(low)


def _as_dtype(values: np.ndarray, dtype: str) -> np.ndarray:
    """Float64 or int64 values as the host data of `dtype`, as the device stores them."""
    if dtype in _FLOATS:
        return narrow(values, dtype)
    return np.asarray(values).astype(host_dtype(dtype))


def _whole(values: np.ndarray, dtype: str) -> np.ndarray:
    """Normal values for an integer dtype: rounded to nearest (ties to even), then clipped."""
    lo, hi = whole_bounds(*INT_RANGES[dtype], dtype)
    return np.clip(np.rint(values), lo, hi)


def host_values(
    init: Any, dtype: np.dtype | str | type, shape: tuple[int, ...], names: Mapping[str, Any],
    key: int,
) -> np.ndarray:  # fmt: skip
    """The NumPy twin: exactly the values the device writes for this key and shape, in the
    host representation of `dtype` (a spec dtype name, or a NumPy dtype; bfloat16 as bits)."""
    name = spec_dtype(dtype)
    kind, a, b = _rule(init, name, names)
    n = int(np.prod(shape, dtype=np.int64))
    if kind == "constant":
        return _as_dtype(np.full(shape, a), name)
    bits = host_bits(key, n)
    if kind == "integers":
        off = ((bits >> np.uint64(32)) * np.uint64(b)) >> np.uint64(32)
        if name == "uint64":  # low may be past int64's range
            return (off + np.uint64(a)).reshape(shape)
        return _as_dtype(off.astype(np.int64) + np.int64(a), name).reshape(shape)
    if kind == "normal":
        values = np.add(a, np.multiply(b, normal.normal_deviates(bits)))
        if name not in _FLOATS:
            values = _whole(values, name)
        return _as_dtype(values, name).reshape(shape)
    u = (bits >> np.uint64(11)).astype(np.float64) / 9007199254740992.0
    return _as_dtype(np.float64(a) + u * np.float64(b), name).reshape(shape)


@functools.cache
def _module() -> Any:
    import cupy as cp

    # No FMA contraction anywhere in this module: the twin rounds every step separately.
    return cp.RawModule(code=KERNEL_SOURCE, options=("-std=c++17", "--fmad=false"))


def device_fill(
    out: Any, init: Any, names: Mapping[str, Any], key: int, *, dtype: str | None = None
) -> None:
    """Write the generator's values for `key` into the contiguous CuPy array `out`, whose spec
    dtype is `dtype` (by default read from the array: uint16 is bfloat16 bits)."""
    import cupy as cp

    name = dtype or spec_dtype(out.dtype)
    kind, a, b = _rule(init, name, names)
    unsigned = np.dtype(f"u{np.dtype(out.dtype).itemsize}")
    if kind == "constant":
        value = host_values(init, name, (1,), names, key)  # the twin's bits, so both agree
        out.view(unsigned).fill(value.view(unsigned)[0])
        return
    n = int(out.size)
    if n == 0:
        return
    suffix = _STORES[name][0]
    blocks = min((n + _THREADS - 1) // _THREADS, _MAX_BLOCKS)
    func = _module().get_function(f"kg_{kind}_{suffix}")
    flat = out.reshape(-1)
    args: tuple[Any, ...]
    if kind == "integers":
        args = (flat, cp.uint64(n), cp.uint64(key), cp.int64(a), cp.uint64(b))
    elif kind == "normal":
        lo, hi = (0.0, 0.0) if name in _FLOATS else whole_bounds(*INT_RANGES[name], name)
        args = (
            flat, cp.uint64(n), cp.uint64(key), cp.float64(a), cp.float64(b), cp.float64(lo),
            cp.float64(hi),
        )  # fmt: skip
    else:
        args = (flat, cp.uint64(n), cp.uint64(key), cp.float64(a), cp.float64(b))
    func((blocks,), (_THREADS,), args)


def scalar_value(
    init: Any, dtype: np.dtype | str | type, names: Mapping[str, Any], key: int
) -> Any:
    """A generated scalar: element 0 of the twin, as a NumPy scalar of its dtype."""
    return host_values(init, dtype, (1,), names, key)[0]
