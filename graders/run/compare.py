"""Compare a kernel's output with the trusted answer, and say what differs in plain words.

The same code runs on NumPy arrays (the CPU tests, staff reproducing a case) and on CuPy arrays
(the run stage, on the device): whatever array module the output lives in does the work, and
only a handful of numbers come back to the host, in one transfer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# Sentinels written into outputs before each launch. Floats get a quiet NaN with a payload
# no arithmetic produces, so "never written" is told apart from "computed a NaN". bfloat16 lives
# in uint16 arrays (graders.run.host_dtypes: no lab has uint16 data).
SENTINEL_BITS: dict[np.dtype, np.unsignedinteger] = {
    np.dtype(np.float32): np.uint32(0x7FC0DEAD),
    np.dtype(np.float64): np.uint64(0x7FF8DEADBEEFDEAD),
    np.dtype(np.float16): np.uint16(0x7EAD),
    np.dtype(np.uint16): np.uint16(0x7FED),  # bfloat16
}
SENTINEL_INTS: dict[np.dtype, np.integer] = {
    np.dtype(np.int32): np.int32(-559038737),  # 0xDEADBEEF
    np.dtype(np.uint32): np.uint32(0xDEADBEEF),
    np.dtype(np.int64): np.int64(-2401053088876216593),  # 0xDEADBEEFDEADBEEF
    # A byte has no value to spare: where the answer is 0xDE itself, an element never written
    # cannot be told from one written right (and is right).
    np.dtype(np.uint8): np.uint8(0xDE),
}
# Guard bands around every buffer hold a poison value of the array's dtype: a NaN (with a
# payload other than the sentinel's) for floats, so that reading past an input spoils the result
# instead of adding a tiny number; for integers a value the lab's inputs never take (see
# `guard_value`; bytes whose data take every value get one they take too). Anything else there
# after a launch means the kernel wrote outside its array.
GUARD_BITS: dict[np.dtype, np.unsignedinteger] = {
    np.dtype(np.float32): np.uint32(0x7FC0A5A5),
    np.dtype(np.float64): np.uint64(0x7FF8A5A5A5A5A5A5),
    np.dtype(np.float16): np.uint16(0x7EA5),
    np.dtype(np.uint16): np.uint16(0x7FE5),  # bfloat16
}
_GUARD_CANDIDATES: dict[np.dtype, tuple[int, ...]] = {
    np.dtype(np.int32): (0x5A5A5A5A, -0x5A5A5A5B, 0x7FFFFFF5),
    np.dtype(np.uint32): (0xA5A5A5A5, 0x5A5A5A5A, 0xFFFFFFF5),
    np.dtype(np.int64): (0x5A5A5A5A5A5A5A5A, -0x5A5A5A5A5A5A5A5B, 0x7FFFFFFFFFFFFFF5),
    np.dtype(np.uint8): (0xA5, 0x5A, 0xF5),
}


def is_float_data(dtype: Any) -> bool:
    """Float data: float16/32/64, and bfloat16 (uint16 bits)."""
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype == np.uint16


def widen(a: Any) -> Any:
    """An array as the values it holds, in float64 (floats, bfloat16 bits read as their
    values) or int64 (integers): what comparisons and properties work in."""
    xp = array_module(a)
    if np.dtype(a.dtype) == np.uint16:
        return (a.astype(xp.uint32) << xp.uint32(16)).view(xp.float32).astype(xp.float64)
    return a.astype(xp.float64 if is_float_data(a.dtype) else xp.int64)


def knows_unwritten(dtype: Any) -> bool:
    """Whether the sentinel tells an element never written from every value a kernel writes."""
    return np.dtype(dtype) != np.uint8


def guard_value(dtype: np.dtype, taken: tuple[float, float] | None = None) -> Any:
    """The guard's bits for an array of `dtype` whose data lies in `taken` (low, high)."""
    dtype = np.dtype(dtype)
    if dtype in GUARD_BITS:
        return GUARD_BITS[dtype]
    unsigned = np.dtype(f"u{dtype.itemsize}")
    candidates = _GUARD_CANDIDATES[dtype]
    choice = candidates[0]
    if taken is not None:
        choice = next((c for c in candidates if not taken[0] <= c <= taken[1]), candidates[-1])
    return np.array(choice, dtype=dtype).view(unsigned)[()]


def sentinel_array(dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """An array of `shape` holding the sentinel of `dtype`."""
    dtype = np.dtype(dtype)
    if dtype in SENTINEL_BITS:
        bits = SENTINEL_BITS[dtype]
        return np.full(shape, bits, dtype=bits.dtype).view(dtype)
    return np.full(shape, SENTINEL_INTS[dtype], dtype=dtype)


def sentinel_mask(got: Any) -> Any:
    """True where `got` still holds the sentinel: the kernel never wrote there."""
    dtype = np.dtype(got.dtype)
    if dtype in SENTINEL_BITS:
        bits = SENTINEL_BITS[dtype]
        return got.view(bits.dtype) == bits
    return got == SENTINEL_INTS[dtype]


@dataclass
class Comparison:
    ok: bool
    total: int
    wrong_count: int = 0
    unwritten_count: int = 0
    first_wrong_index: tuple[int, ...] | None = None
    expected: float | None = None
    got: float | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None


def array_module(a: Any) -> Any:
    """numpy, or cupy for a CuPy array (without importing CuPy for NumPy arrays)."""
    if type(a).__module__.startswith("cupy"):
        import cupy

        return cupy
    return np


def _to_host(xp: Any, values: list[Any]) -> list[float]:
    """Scalars computed on the device, fetched in one copy (each fetch is a synchronisation)."""
    stacked = xp.stack([xp.asarray(v, dtype=xp.float64).reshape(()) for v in values])
    host = stacked.get() if hasattr(stacked, "get") else stacked
    return [float(x) for x in np.asarray(host)]


def compare_elementwise(got: Any, expected: Any, *, atol: float, rtol: float) -> Comparison:
    """|got - expected| <= atol + rtol * |expected| everywhere; integers must be equal.
    float16 and bfloat16 (uint16 bits) are compared as the float64 values they hold."""
    xp = array_module(got)
    if got.shape != expected.shape:
        got = got.reshape(expected.shape)
    unwritten = sentinel_mask(got)
    if not knows_unwritten(got.dtype):  # a byte equal to the sentinel where that is right
        unwritten &= expected != SENTINEL_INTS[np.dtype(got.dtype)]
    if not is_float_data(got.dtype):
        wrong = (got.astype(xp.int64) != expected.astype(xp.int64)) | unwritten
        diff = xp.abs(got.astype(xp.float64) - expected.astype(xp.float64))
        e = expected.astype(xp.float64)
    else:
        g = widen(got)
        e = expected.astype(xp.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = xp.abs(g - e)
            # NaN compares False: wrong. An infinite answer is right only when reproduced
            # exactly (its bound is infinite too, so +inf would pass for -inf).
            ok = (diff <= atol + rtol * xp.abs(e)) & xp.isfinite(e)
            ok |= (g == e) & xp.isinf(e)
            ok |= xp.isnan(g) & xp.isnan(e)
        del g
        wrong = ~ok | unwritten
    total = int(got.size)
    if total == 0:
        return Comparison(ok=True, total=0)
    finite = xp.isfinite(diff)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = diff / xp.abs(e)
    rel_finite = xp.isfinite(rel)
    # The first True (0 when there is none): argmax of the mask read as bytes.
    first = xp.argmax(wrong.reshape(-1).view(xp.uint8))
    numbers = _to_host(
        xp,
        [
            xp.count_nonzero(wrong),
            xp.count_nonzero(unwritten),
            finite.all(),
            xp.where(finite, diff, -np.inf).max(),
            rel_finite.any(),
            xp.where(rel_finite, rel, -np.inf).max(),
            first,
            xp.take(expected.reshape(-1), first).astype(xp.float64),
            widen(xp.take(got.reshape(-1), first)).astype(xp.float64),
            xp.take(unwritten.reshape(-1), first),
        ],
    )
    wrong_count, unwritten_count, all_finite, max_abs, any_rel, max_rel = numbers[:6]
    result = Comparison(ok=wrong_count == 0, total=total, wrong_count=int(wrong_count))
    result.unwritten_count = int(unwritten_count)
    result.max_abs_error = max_abs if all_finite else float("inf")
    result.max_rel_error = max_rel if any_rel else None
    if wrong_count:
        flat = int(numbers[6])
        result.first_wrong_index = tuple(int(i) for i in np.unravel_index(flat, got.shape))
        result.expected = numbers[7]
        result.got = None if numbers[9] else numbers[8]
    return result


def compare_sum(got: Any, expected: float, *, atol: float, rtol: float) -> Comparison:
    """The grader sums `got` (per-block partial sums) in float64 and checks the total."""
    xp = array_module(got)
    unwritten = sentinel_mask(got).reshape(-1)
    count, first, total = _to_host(
        xp,
        [
            xp.count_nonzero(unwritten),
            xp.argmax(unwritten.view(xp.uint8)),
            widen(got).astype(xp.float64).sum(),
        ],
    )
    result = Comparison(ok=False, total=1, unwritten_count=int(count))
    result.expected = float(expected)
    if count:
        result.wrong_count = 1
        result.first_wrong_index = (int(first),)
        return result
    result.got = total
    diff = abs(total - expected)
    if np.isfinite(diff):
        result.max_abs_error = diff
        result.max_rel_error = diff / abs(expected) if expected else None
    else:  # a NaN or an infinity among the partial sums: as compare_elementwise reports it
        result.max_abs_error = float("inf")
    result.ok = bool(diff <= atol + rtol * abs(expected))
    result.wrong_count = 0 if result.ok else 1
    if not result.ok:
        result.first_wrong_index = (0,)
    return result


def _fmt(x: float | None) -> str:
    if x is None:
        return "nothing (never written)"
    if x != x:
        return "NaN"
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.7g}"


def describe(cmp: Comparison, output: str, *, check: str = "elementwise") -> str:
    """One sentence a student can act on."""
    if cmp.ok:
        if cmp.max_abs_error is None:
            return f"{output} matches the expected answer."
        return (
            f"{output} matches the expected answer (max abs error {cmp.max_abs_error:.3g}, "
            f"max rel error {cmp.max_rel_error or 0:.3g})."
        )
    if check == "sum":
        if cmp.got is None:
            i = cmp.first_wrong_index[0] if cmp.first_wrong_index else 0
            return (
                f"{cmp.unwritten_count} of the partial sums in {output} were never written "
                f"(the first is {output}[{i}]); every block must write its partial sum."
            )
        return (
            f"The sum of {output} is wrong: expected {_fmt(cmp.expected)}, got {_fmt(cmp.got)} "
            f"(abs error {cmp.max_abs_error:.3g})."
        )
    if cmp.unwritten_count == cmp.total:
        return f"The kernel wrote nothing into {output}: every element still holds the sentinel."
    where = ", ".join(str(i) for i in (cmp.first_wrong_index or ()))
    text = (
        f"{cmp.wrong_count} of {cmp.total} elements of {output} are wrong; the first is "
        f"{output}[{where}]: expected {_fmt(cmp.expected)}, got {_fmt(cmp.got)}"
    )
    if cmp.unwritten_count:
        text += f" ({cmp.unwritten_count} elements were never written)"
    if cmp.max_abs_error is not None and cmp.max_abs_error != float("inf"):
        text += f"; max abs error {cmp.max_abs_error:.3g}"
    return text + "."
