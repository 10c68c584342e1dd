"""Compare a kernel's output with the trusted answer, and say what differs in plain words.

Pure NumPy, so it is tested without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Sentinels written into outputs before each launch. Floats get a quiet NaN with a payload
# no arithmetic produces, so "never written" is told apart from "computed a NaN".
SENTINEL_BITS: dict[np.dtype, np.unsignedinteger] = {
    np.dtype(np.float32): np.uint32(0x7FC0DEAD),
    np.dtype(np.float64): np.uint64(0x7FF8DEADBEEFDEAD),
}
SENTINEL_INTS: dict[np.dtype, np.integer] = {
    np.dtype(np.int32): np.int32(-559038737),  # 0xDEADBEEF
    np.dtype(np.uint32): np.uint32(0xDEADBEEF),
    np.dtype(np.int64): np.int64(-2401053088876216593),  # 0xDEADBEEFDEADBEEF
}
# Guard bands around every buffer are filled with this byte; any other byte there after a
# launch means the kernel wrote outside its array.
GUARD_BYTE = 0xA5


def sentinel_array(dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """An array of `shape` holding the sentinel of `dtype`."""
    dtype = np.dtype(dtype)
    if dtype in SENTINEL_BITS:
        bits = SENTINEL_BITS[dtype]
        return np.full(shape, bits, dtype=bits.dtype).view(dtype)
    return np.full(shape, SENTINEL_INTS[dtype], dtype=dtype)


def sentinel_mask(got: np.ndarray) -> np.ndarray:
    """True where `got` still holds the sentinel: the kernel never wrote there."""
    dtype = got.dtype
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


def _as_float(x: np.generic | float | int) -> float:
    return float(x)


def compare_elementwise(
    got: np.ndarray, expected: np.ndarray, *, atol: float, rtol: float
) -> Comparison:
    """|got - expected| <= atol + rtol * |expected| everywhere; integers must be equal."""
    got = np.asarray(got)
    expected = np.asarray(expected)
    if got.shape != expected.shape:
        got = got.reshape(expected.shape)
    unwritten = sentinel_mask(got)
    if np.issubdtype(got.dtype, np.integer):
        wrong = (got.astype(np.int64) != expected.astype(np.int64)) | unwritten
        diff = np.abs(got.astype(np.float64) - expected.astype(np.float64))
    else:
        g = got.astype(np.float64)
        e = expected.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(g - e)
            bound = atol + rtol * np.abs(e)
            ok = diff <= bound  # NaN and inf compare False: they are wrong
            ok |= (g == e) & np.isinf(e)  # an expected infinity, reproduced, is right
            ok |= np.isnan(g) & np.isnan(e)
        wrong = ~ok | unwritten
    wrong_count = int(np.count_nonzero(wrong))
    result = Comparison(ok=wrong_count == 0, total=int(got.size), wrong_count=wrong_count)
    result.unwritten_count = int(np.count_nonzero(unwritten))
    finite = np.isfinite(diff)
    if got.size:
        result.max_abs_error = float(diff[finite].max()) if finite.any() else float("inf")
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = diff / np.abs(expected.astype(np.float64))
        rel_finite = np.isfinite(rel)
        result.max_rel_error = float(rel[rel_finite].max()) if rel_finite.any() else None
        if not finite.all():
            result.max_abs_error = float("inf")
    if wrong_count:
        flat = int(np.flatnonzero(wrong.reshape(-1))[0])
        index = tuple(int(i) for i in np.unravel_index(flat, got.shape))
        result.first_wrong_index = index
        result.expected = _as_float(expected.reshape(-1)[flat])
        result.got = None if unwritten.reshape(-1)[flat] else _as_float(got.reshape(-1)[flat])
    return result


def compare_sum(got: np.ndarray, expected: float, *, atol: float, rtol: float) -> Comparison:
    """The grader sums `got` (per-block partial sums) in float64 and checks the total."""
    unwritten = sentinel_mask(np.asarray(got))
    total = float(np.asarray(got).astype(np.float64).sum()) if not unwritten.any() else None
    result = Comparison(ok=False, total=1, unwritten_count=int(np.count_nonzero(unwritten)))
    result.expected = float(expected)
    result.got = total
    if total is None:
        result.wrong_count = 1
        result.first_wrong_index = (int(np.flatnonzero(unwritten.reshape(-1))[0]),)
        return result
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
