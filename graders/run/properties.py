"""The built-in properties an output may be checked for (`check = "rows_sum_to_one"`, ...).

Each takes the kernel's output (and what it needs) and returns whether it holds, with a
sentence for the student. They use only array methods, so they work on NumPy arrays here and on
CuPy arrays on the device. The run stage checks that every element was written first: an output
still holding the grader's marker fails as "never written", not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np


@dataclass(frozen=True)
class PropertyResult:
    ok: bool
    message: str


def _xp(array: Any) -> ModuleType:
    if type(array).__module__.startswith("cupy"):
        import cupy

        return cupy
    return np


def _fmt(x: float) -> str:
    return f"{x:.7g}"


def rows_sum_to_one(got: Any, *, name: str, atol: float, rtol: float) -> PropertyResult:
    """Every row (along the last axis) sums to 1 within cols * atol + rtol, summed in float64:
    the bound an output within the elementwise tolerance of a true distribution always meets."""
    xp = _xp(got)
    rows = got.reshape(-1, got.shape[-1]).astype(xp.float64)
    sums = rows.sum(axis=1)
    bound = rows.shape[1] * atol + rtol
    off = ~(xp.abs(sums - 1.0) <= bound)  # NaN is off
    count = int(off.sum())
    if not count:
        return PropertyResult(True, f"Every row of {name} sums to 1.")
    first = int(xp.flatnonzero(off)[0])
    return PropertyResult(
        False,
        f"{count} of {rows.shape[0]} rows of {name} do not sum to 1 (within {bound:.3g}); the "
        f"first is row {first}, which sums to {_fmt(float(sums[first]))}.",
    )


def sorted_permutation(got: Any, source: Any, *, name: str, of: str) -> PropertyResult:
    """`got`, flattened, is in ascending order and holds exactly the values of `source`."""
    xp = _xp(got)
    flat = got.reshape(-1)
    if flat.size > 1:
        later = flat[1:]
        earlier = flat[:-1]
        # NaN sorts last, as numpy.sort puts it: a NaN before a number is out of order.
        wrong = (
            (later < earlier) | (xp.isnan(earlier) & ~xp.isnan(later))
            if flat.dtype.kind == "f"
            else later < earlier
        )
        if bool(wrong.any()):
            i = int(xp.flatnonzero(wrong)[0])
            return PropertyResult(
                False,
                f"{name} is not in ascending order: {name}[{i}] = {_fmt(float(flat[i]))} comes "
                f"before {name}[{i + 1}] = {_fmt(float(flat[i + 1]))}.",
            )
    want = xp.sort(source.reshape(-1))
    if flat.dtype.kind == "f":
        differ = ~((flat == want) | (xp.isnan(flat) & xp.isnan(want)))
    else:
        differ = flat != want
    if bool(differ.any()):
        i = int(xp.flatnonzero(differ)[0])
        return PropertyResult(
            False,
            f"{name} is sorted but does not hold the values of {of}: {name}[{i}] is "
            f"{_fmt(float(flat[i]))}, but the element of {of} that belongs there is "
            f"{_fmt(float(want[i]))}.",
        )
    return PropertyResult(True, f"{name} holds the values of {of} in ascending order.")
