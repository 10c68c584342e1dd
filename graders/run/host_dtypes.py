"""Host (NumPy) representation of each spec dtype, and bfloat16, which NumPy lacks, as bits.

A bfloat16 array lives on the host as uint16 bits: the upper half of a float32, rounded to
nearest even (the rounding `__float2bfloat16` does). `bfloat16_bits` and `bfloat16_values`
convert both ways; every bfloat16 is exactly a float32, so code that reads the data (a Python
oracle) gets float32 values.
"""

from __future__ import annotations

import numpy as np

from graders.spec.dtypes import HOST_DTYPES


def host_dtype(name: str) -> np.dtype:
    """The NumPy dtype that holds a spec dtype's data (uint16 bits for bfloat16)."""
    return np.dtype(HOST_DTYPES[name])


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
