"""Issue 12's four labs, on the CPU: their reference algorithms give the oracle's answer, their
tolerances admit float32 kernels, and each faulty kernel's mistake shows on the case its header
names and not on its pass case. Kernels are emulated with NumPy on sample data of each case's
distribution (graders.labcheck.sample); the GPU runs them for real in phase 2 (`lab check`).
"""

from __future__ import annotations

import numpy as np
import pytest

from graders.labcheck.sample import sample_case
from graders.spec import LabSpec, load_builtin_lab

F32 = np.float32
GUARD_BYTES = 64 * 1024  # graders/run/harness.py: a write this far past an array is caught


def _case(lab: LabSpec, name: str) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    arrays, _ = sample_case(lab, lab.case(name), seed=1)
    return lab.sizes_for(name), arrays


# --- matrix-transpose: index arithmetic of each kernel over every (row, column) -------------


def _transpose_writes(rows: int, cols: int, out_row_length: int, guarded: bool):  # noqa: ANN202
    """(write index into out, read index into in) of every element the kernels touch: the grid
    of 32 x 32 tiles, checked against the matrix or not."""
    tiles_r, tiles_c = -(-rows // 32) * 32, -(-cols // 32) * 32
    r, c = np.meshgrid(np.arange(tiles_r), np.arange(tiles_c), indexing="ij")
    if guarded:
        keep = (r < rows) & (c < cols)
        r, c = r[keep], c[keep]
    return c * out_row_length + r, r * cols + c


@pytest.mark.parametrize("case", ["one-1x1", "row-1x1000", "column-1000x1", "rect-31x33"])
def test_transpose_reference_indexing_is_the_oracles_answer(case: str) -> None:
    lab = load_builtin_lab("matrix-transpose")
    names, data = _case(lab, case)
    rows, cols = names["rows"], names["cols"]
    write, read = _transpose_writes(rows, cols, rows, guarded=True)
    out = np.full(rows * cols, np.nan, F32)
    out[write] = data["in"].reshape(-1)[read]
    assert np.array_equal(out.reshape(cols, rows), data["in"].T)


def test_transpose_faulty_kernels_write_past_out_only_when_ragged_or_rectangular() -> None:
    for out_row_length, guarded in (("cols", True), ("rows", False)):  # the two faulty kernels
        for case, past in (("rect-31x33", True), ("square-1024", False)):
            rows, cols = (31, 33) if case == "rect-31x33" else (1024, 1024)
            length = cols if out_row_length == "cols" else rows
            write, _ = _transpose_writes(rows, cols, length, guarded)
            beyond = int(write.max()) - (rows * cols - 1)
            assert (beyond > 0) == past, (out_row_length, case)
            if past:  # lands in the guard band, so it is reported, not a crash
                assert beyond * 4 < GUARD_BYTES


# --- softmax: float32 emulation against the float64 oracle ---------------------------------


def _softmax64(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _softmax32(x: np.ndarray, *, block: int = 256, sequential: bool = False, naive: bool = False,
               max_start: float | None = None) -> np.ndarray:  # fmt: skip
    """One block per row: per-thread strided sums then a tree, or one thread's running sum."""
    m = x.max(axis=1, keepdims=True)
    if max_start is not None:
        m = np.maximum(m, F32(max_start))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        e = np.exp(x if naive else (x - m).astype(F32)).astype(F32)
        if sequential:
            s = np.cumsum(e, axis=1, dtype=F32)[:, -1:]
        else:
            per = -(-x.shape[1] // block)
            padded = np.zeros((x.shape[0], per * block), F32)
            padded[:, : x.shape[1]] = e
            acc = padded.reshape(x.shape[0], per, block).sum(axis=1, dtype=F32)
            half = block // 2
            while half:
                acc[:, :half] += acc[:, half : 2 * half]
                half //= 2
            s = acc[:, :1]
        return (e / s).astype(F32)


def _softmax_ok(lab: LabSpec, names: dict[str, float], got: np.ndarray, want: np.ndarray) -> bool:
    atol, rtol = lab.tolerance["float32"].for_case(names)
    with np.errstate(invalid="ignore"):
        return bool((np.abs(got.astype(np.float64) - want) <= atol + rtol * np.abs(want)).all())


SOFTMAX_CASES = [
    "one-1x1", "row-1x1000", "column-1000x1", "small-7x1000", "overflow-512x1000",
    "shifted-256x4096", "negative-256x999", "wide-16x32768",
]  # fmt: skip


@pytest.mark.parametrize("case", SOFTMAX_CASES)
def test_softmax_tolerance_admits_float32_kernels(case: str) -> None:
    lab = load_builtin_lab("softmax")
    names, data = _case(lab, case)
    x = data["x"][:64]
    want = _softmax64(x)
    assert _softmax_ok(lab, names, _softmax32(x), want)  # a tree: within 1e-6
    assert _softmax_ok(lab, names, _softmax32(x, sequential=True), want)  # one thread: 5e-5


@pytest.mark.parametrize(
    ("mistake", "fails", "passes"),
    [
        ({"naive": True}, "overflow-512x1000", "row-1x1000"),
        ({"naive": True}, "shifted-256x4096", "row-1x1000"),
        ({"naive": True}, "negative-256x999", "row-1x1000"),
        ({"max_start": 0.0}, "negative-256x999", "row-1x1000"),
    ],
)
def test_softmax_faulty_kernels_fail_where_their_headers_say(
    mistake: dict[str, float], fails: str, passes: str
) -> None:
    lab = load_builtin_lab("softmax")
    for case, ok in ((fails, False), (passes, True)):
        names, data = _case(lab, case)
        x = data["x"][:64]
        assert _softmax_ok(lab, names, _softmax32(x, **mistake), _softmax64(x)) == ok, case


def test_softmax_one_element_per_thread_misses_most_of_a_1000_column_row() -> None:
    lab = load_builtin_lab("softmax")
    names, _ = _case(lab, "row-1x1000")
    block = lab.declares["BLOCK"].default
    assert names["cols"] > block  # faulty/one_element_per_thread.cu leaves 744 unwritten
    assert lab.sizes_for("column-1000x1")["cols"] <= block  # and is right with one column


# --- histogram -------------------------------------------------------------------------------


def test_histogram_data_are_skewed_and_signed_bytes_go_below_the_bins() -> None:
    lab = load_builtin_lab("histogram")
    _, data = _case(lab, "skewed-1048579")
    counts = np.bincount(data["data"], minlength=256)
    assert counts[124:133].sum() > 0.95 * data["data"].size  # a few hot bins
    assert (data["data"] >= 128).mean() > 0.4  # faulty/signed_bytes.cu: negative indices
    assert GUARD_BYTES > 128 * 4  # bins[-128] is inside the guard band before bins
    _, clipped = _case(lab, "clipped-300000")
    ends = np.bincount(clipped["data"], minlength=256)[[0, 255]].sum()
    assert ends > 0.7 * clipped["data"].size


def test_histogram_one_element_per_thread_loses_elements_past_the_grid() -> None:
    lab = load_builtin_lab("histogram")
    for case, lost in (("skewed-1048579", True), ("n-1000", False), ("hidden-tail", True)):
        names = lab.sizes_for(case)
        threads = names["nblocks"] * 256
        assert (names["n"] > threads) == lost, case


# --- prefix-sum: the three kernels, emulated per block -------------------------------------


def _scan(data: np.ndarray, *, offsets: str = "before", totals_limit: int | None = None,
          exclusive: bool = False) -> np.ndarray:  # fmt: skip
    n = data.size
    blocks = -(-n // 1024)
    padded = np.zeros(blocks * 1024, np.int64)
    padded[:n] = data
    per_block = padded.reshape(blocks, 1024)
    out = np.cumsum(per_block, axis=1)
    if exclusive:
        out -= per_block
    sums = per_block.sum(axis=1)
    scanned = sums.copy()
    limit = blocks if totals_limit is None else min(blocks, totals_limit)
    scanned[:limit] = np.cumsum(sums[:limit])
    if offsets == "before":
        out[1:] += scanned[:-1, None]
    elif offsets == "own":
        out[1:] += scanned[1:, None]
    return out.reshape(-1)[:n]


@pytest.mark.parametrize("case", ["by-hand-10", "n-1", "n-1025", "n-3000", "n-4194309"])
def test_prefix_sum_reference_algorithm_is_the_oracles_answer(case: str) -> None:
    lab = load_builtin_lab("prefix-sum")
    _, data = _case(lab, case)
    assert np.array_equal(_scan(data["in"]), np.cumsum(data["in"], dtype=np.int64))


@pytest.mark.parametrize(
    ("mistake", "fails", "passes"),
    [
        ({"offsets": "none"}, "n-1025", "n-1000"),
        ({"offsets": "own"}, "n-1025", "n-1000"),
        ({"totals_limit": 1024}, "n-4194309", "n-1048576"),
        ({"exclusive": True}, "n-1000", None),
    ],
)
def test_prefix_sum_faulty_kernels_fail_where_their_headers_say(
    mistake: dict[str, object], fails: str, passes: str | None
) -> None:
    lab = load_builtin_lab("prefix-sum")
    for case, ok in ((fails, False), (passes, True)):
        if case is None:
            continue
        _, data = _case(lab, case)
        got = _scan(data["in"], **mistake)  # type: ignore[arg-type]
        assert np.array_equal(got, np.cumsum(data["in"], dtype=np.int64)) == ok, case


def test_prefix_sums_never_leave_int32() -> None:
    lab = load_builtin_lab("prefix-sum")
    init = lab.param("in").init
    assert init is not None
    largest = max(max(c.sizes["n"] for c in lab.cases), 0)
    assert largest * max(abs(int(init.low)), abs(int(init.high))) < 2**31
