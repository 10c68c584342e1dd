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
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from graders.spec import expr

GOLDEN = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1
MAX_INT_RANGE = 1 << 32
_THREADS = 256
_MAX_BLOCKS = 8192

# dtype name -> the suffix of the device kernels that write it.
_SUFFIX = {"float32": "f32", "float64": "f64", "int32": "i32", "uint32": "u32", "int64": "i64"}
_C_TYPE = {
    "f32": "float",
    "f64": "double",
    "i32": "int",
    "u32": "unsigned int",
    "i64": "long long",
}

KERNEL_SOURCE = r"""
typedef unsigned long long kg_u64;
__device__ __forceinline__ kg_u64 kg_bits(kg_u64 key, kg_u64 i) {
    kg_u64 z = key + (i + 1ULL) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
""" + "".join(
    f"""
extern "C" __global__ void kg_uniform_{s}({t}* out, kg_u64 n, kg_u64 key, double lo, double span) {{
    for (kg_u64 i = blockIdx.x * (kg_u64)blockDim.x + threadIdx.x; i < n;
         i += (kg_u64)gridDim.x * blockDim.x) {{
        double u = (double)(kg_bits(key, i) >> 11) / 9007199254740992.0;
        out[i] = ({t})__dadd_rn(lo, __dmul_rn(u, span));
    }}
}}
extern "C" __global__ void kg_integers_{s}({t}* out, kg_u64 n, kg_u64 key, long long low,
                                           kg_u64 range) {{
    for (kg_u64 i = blockIdx.x * (kg_u64)blockDim.x + threadIdx.x; i < n;
         i += (kg_u64)gridDim.x * blockDim.x) {{
        kg_u64 off = ((kg_bits(key, i) >> 32) * range) >> 32;
        out[i] = ({t})(low + (long long)off);
    }}
}}
"""
    for s, t in _C_TYPE.items()
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


def _rule(init: Any, dtype: np.dtype, names: Mapping[str, Any]) -> tuple[str, Any, Any]:
    """('uniform', lo, span) | ('integers', low, range) | ('constant', value, None)."""
    dist = str(_field(init, "dist", "uniform"))
    if dist in ("constant", "zeros"):
        value = 0 if dist == "zeros" else expr.evaluate(_field(init, "value", 0), names)
        return "constant", value, None
    low = expr.evaluate(_field(init, "low", 0), names)
    high = expr.evaluate(_field(init, "high", 1), names)
    if dist not in ("uniform", "integers"):
        raise ValueError(f"Unknown input distribution {dist!r}; use uniform, integers or constant.")
    if dist == "integers" or np.issubdtype(dtype, np.integer):
        span = int(high) - int(low) + 1
        if not 1 <= span <= MAX_INT_RANGE:
            raise ValueError(
                f"An integer input range of {span} values is not supported; low..high may span "
                f"at most {MAX_INT_RANGE} values."
            )
        return "integers", int(low), span
    return "uniform", float(low), float(high) - float(low)


def host_values(
    init: Any, dtype: np.dtype | str, shape: tuple[int, ...], names: Mapping[str, Any], key: int
) -> np.ndarray:
    """The NumPy twin: exactly the values the device writes for this key and shape."""
    dtype = np.dtype(dtype)
    kind, a, b = _rule(init, dtype, names)
    n = int(np.prod(shape, dtype=np.int64))
    if kind == "constant":
        return np.full(shape, a, dtype=dtype)
    bits = host_bits(key, n)
    if kind == "integers":
        off = ((bits >> np.uint64(32)) * np.uint64(b)) >> np.uint64(32)
        return (off.astype(np.int64) + np.int64(a)).astype(dtype).reshape(shape)
    u = (bits >> np.uint64(11)).astype(np.float64) / 9007199254740992.0
    return (np.float64(a) + u * np.float64(b)).astype(dtype).reshape(shape)


@functools.cache
def _module() -> Any:
    import cupy as cp

    # No FMA contraction anywhere in this module: the twin rounds every step separately.
    return cp.RawModule(code=KERNEL_SOURCE, options=("-std=c++17", "--fmad=false"))


def device_fill(out: Any, init: Any, names: Mapping[str, Any], key: int) -> None:
    """Write the generator's values for `key` into the contiguous CuPy array `out`."""
    import cupy as cp

    dtype = np.dtype(out.dtype)
    kind, a, b = _rule(init, dtype, names)
    if kind == "constant":
        out.fill(dtype.type(a))
        return
    n = int(out.size)
    if n == 0:
        return
    suffix = _SUFFIX[dtype.name]
    blocks = min((n + _THREADS - 1) // _THREADS, _MAX_BLOCKS)
    func = _module().get_function(f"kg_{kind}_{suffix}")
    flat = out.reshape(-1)
    if kind == "integers":
        args = (flat, cp.uint64(n), cp.uint64(key), cp.int64(a), cp.uint64(b))
    else:
        args = (flat, cp.uint64(n), cp.uint64(key), cp.float64(a), cp.float64(b))
    func((blocks,), (_THREADS,), args)


def scalar_value(init: Any, dtype: np.dtype | str, names: Mapping[str, Any], key: int) -> Any:
    """A generated scalar: element 0 of the twin, as a NumPy scalar of its dtype."""
    return host_values(init, dtype, (1,), names, key)[0]
