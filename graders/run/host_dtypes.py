"""Host (NumPy) representation of each spec dtype, and bfloat16, which NumPy lacks, as bits.

A bfloat16 array lives on the host as uint16 bits: the upper half of a float32, rounded to
nearest even (the rounding `__float2bfloat16` does). `bfloat16_bits` and `bfloat16_values`
convert both ways; every bfloat16 is exactly a float32, so code that reads the data (a Python
oracle) gets float32 values. On the device (CuPy) it is held the same way. No lab has uint16
data, so inside the run stage an array of NumPy dtype uint16 is always bfloat16 bits
(`spec_dtype` reads it back so).
"""

from __future__ import annotations

import numpy as np

from graders.spec.dtypes import HOST_DTYPES


def host_dtype(name: str) -> np.dtype:
    """The NumPy dtype that holds a spec dtype's data (uint16 bits for bfloat16)."""
    return np.dtype(HOST_DTYPES[name])


def spec_dtype(dtype: object) -> str:
    """The spec dtype a host (or CuPy) dtype holds: its name, and "bfloat16" for uint16 bits.
    A spec name ("bfloat16", "float32", ...) is returned as it is."""
    if isinstance(dtype, str) and dtype in HOST_DTYPES:
        return dtype
    name = np.dtype(dtype).name  # type: ignore[call-overload]
    return "bfloat16" if name == "uint16" else name


def is_float_data(dtype: object) -> bool:
    """Whether arrays of this dtype hold floats (float16/32/64, and bfloat16 as uint16 bits)."""
    return spec_dtype(dtype) in ("float16", "bfloat16", "float32", "float64")


def narrow(values: np.ndarray, dtype: str) -> np.ndarray:
    """Float64 values as a float dtype's host data, rounded to nearest even: float16 and
    bfloat16 through float32 (each step rounded, as the device generator does)."""
    if dtype == "float64":
        return np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore"):  # past a dtype's largest value is infinity, on both sides
        as32 = np.asarray(values).astype(np.float32)
        if dtype == "float16":
            return as32.astype(np.float16)
    if dtype == "bfloat16":
        return bfloat16_bits(as32)
    return as32


def bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """Float values as bfloat16 bits (uint16), rounded to nearest even; NaN stays a quiet NaN."""
    as32 = np.ascontiguousarray(values, dtype=np.float32)
    bits = as32.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    out = rounded.astype(np.uint16)
    nan = np.isnan(as32)
    if nan.any():
        out[nan] = ((bits[nan] >> 16) | 0x0040).astype(np.uint16)  # keep the sign, make it quiet
    return out


def bfloat16_values(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bits (uint16) as the float32 values they stand for (exact)."""
    wide = np.ascontiguousarray(bits, dtype=np.uint16).astype(np.uint32) << 16
    return wide.view(np.float32)


def readable(dtype_name: str, host: np.ndarray) -> np.ndarray:
    """The data as code should read it: bfloat16 bits become float32 values, others as they are."""
    if dtype_name == "bfloat16":
        return bfloat16_values(host)
    return host
