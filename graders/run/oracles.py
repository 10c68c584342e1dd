"""Trusted answers, computed in float64 on the GPU (CuPy/cuBLAS) from fresh copies of the inputs.

An oracle sees only inputs the generator made again after the student's launch, never the
submission's buffers. It returns the answer in the array module of its inputs (CuPy in the run
stage; NumPy for staff and the CPU tests, the same code); its float64 working copies are zeroed
before it returns, and the caller zeroes the answer once it is compared, so no answer is left
in device memory where a later kernel could read it.

Each oracle reads its operands by position: the lab's `in` arrays in order, its float scalars
in order. `sum` and `dot` return one number (shape (1,)); the harness checks it against the
output as the output's `check` says.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from graders.run.compare import array_module, is_float_data, widen

BUILTIN_ORACLES = ("scale", "hadamard", "sum", "dot", "matmul", "conv1d", "conv2d")


class OracleError(ValueError):
    """The lab asks for an oracle that does not fit its parameters."""


def _need(ins: list[np.ndarray], n: int, oracle: str) -> None:
    if len(ins) < n:
        raise OracleError(f"The '{oracle}' oracle needs {n} input arrays; the lab has {len(ins)}.")


def _wide(cp, data):  # noqa: ANN001, ANN202 - cupy is imported lazily
    """A float64 (or int64) copy of one input; float16 and bfloat16 (bits) as their values."""
    return widen(data)


def _conv1d(cp, x, mask):  # noqa: ANN001, ANN202
    r = (mask.size - 1) // 2
    padded = cp.pad(x, r)
    out = cp.zeros_like(x)
    for j in range(mask.size):
        out += padded[j : j + x.size] * mask[j]
    return out


def _conv2d(cp, x, mask):  # noqa: ANN001, ANN202
    side = int(round(mask.size**0.5))
    mask = mask.reshape(side, side)
    r = (side - 1) // 2
    h, w = x.shape
    padded = cp.pad(x, r)
    out = cp.zeros_like(x)
    for dy in range(side):
        for dx in range(side):
            out += padded[dy : dy + h, dx : dx + w] * mask[dy, dx]
    return out


def compute(
    oracle: str,
    ins: list[Any],
    float_scalars: list[float],
    out_shape: tuple[int, ...],
    out_dtype: np.dtype,
) -> Any:
    """The expected output: float64 for float outputs, int64 for integer ones."""
    if oracle not in BUILTIN_ORACLES:
        raise OracleError(f"Unknown oracle '{oracle}'; built-ins are {', '.join(BUILTIN_ORACLES)}.")
    xp = array_module(ins[0]) if ins else np
    wide = [_wide(xp, a) for a in ins]
    try:
        result = _ORACLES[oracle](xp, wide, float_scalars, out_shape)
        if not is_float_data(out_dtype):
            # C integer arithmetic wraps; so does the expected answer.
            result = result.astype(out_dtype).astype(np.int64)
    finally:
        for arr in wide:
            arr.fill(0)
        del wide
    return result


def _scale(cp, d, fs, shape):  # noqa: ANN001, ANN202
    _need(d, 1, "scale")
    if not fs:
        raise OracleError("The 'scale' oracle needs a float scalar (the factor).")
    return (d[0] * fs[0]).reshape(shape)


def _hadamard(cp, d, fs, shape):  # noqa: ANN001, ANN202
    _need(d, 2, "hadamard")
    return (d[0] * d[1]).reshape(shape)


def _sum(cp, d, fs, shape):  # noqa: ANN001, ANN202
    _need(d, 1, "sum")
    return d[0].sum().reshape(1)


def _dot(cp, d, fs, shape):  # noqa: ANN001, ANN202
    _need(d, 2, "dot")
    return (d[0].ravel() * d[1].ravel()).sum().reshape(1)


def _matmul(cp, d, fs, shape):  # noqa: ANN001, ANN202
    _need(d, 2, "matmul")
    return cp.matmul(d[0], d[1]).reshape(shape)


def _conv1d_oracle(cp, d, fs, shape):  # noqa: ANN001, ANN202
    _need(d, 2, "conv1d")
    return _conv1d(cp, d[0].ravel(), d[1].ravel()).reshape(shape)


def _conv2d_oracle(cp, d, fs, shape):  # noqa: ANN001, ANN202
    _need(d, 2, "conv2d")
    return _conv2d(cp, d[0].reshape(shape), d[1]).reshape(shape)


_ORACLES: dict[str, Callable] = {
    "scale": _scale,
    "hadamard": _hadamard,
    "sum": _sum,
    "dot": _dot,
    "matmul": _matmul,
    "conv1d": _conv1d_oracle,
    "conv2d": _conv2d_oracle,
}
