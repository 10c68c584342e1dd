"""Each lab's tolerance, on its own generated data, admits an honest float evaluation in every
reasonable order and rejects the shortcuts of `lab check` and the mistakes its faulty kernels
make (simulated with NumPy in tests/graders/rounding.py).

The figures the lab.toml comments quote come from bench/honest_error.py, which runs the same
simulations on every case.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from graders.labcheck.probes import PROBE_KINDS
from graders.spec import LabSpec, load_builtin_lab, load_lab
from tests.graders.rounding import (
    F32,
    HONEST,
    U32,
    case_data,
    exact_sum,
    grid_stride,
    random_order,
    ratio,
    sequential,
    shortcut_miss,
    tree,
)

LOOSE_LAB = Path(__file__).parent / "labcheck" / "samples" / "loose-sum"

# Cases small enough to simulate every order in CI (a few seconds each at most).
HONEST_CASES = [
    ("vector-scale", "n-1048579"),
    ("vector-scale", "hidden-large"),
    ("hadamard", "n-1048579"),
    ("array-sum", "n-1000"),
    ("array-sum", "n-1048579"),
    ("array-sum", "hidden-few-blocks"),
    ("array-sum", "n-8388608"),
    ("array-sum-atomic", "n-1000"),
    ("array-sum-atomic", "hidden-small"),
    ("array-sum-atomic", "n-8388608"),
    ("dot-product", "n-1048583"),
    ("dot-product", "hidden-two-blocks"),
    ("matmul-naive", "rect-63x65x70"),
    ("matmul-tiled", "square-2048"),
    ("matmul-coarsened", "hidden-ragged"),
    ("matmul-tiled-f64", "square-1023"),
    ("conv1d-tiled", "n-1048579-r8"),
    ("conv2d", "31x33-r2"),
    ("conv2d", "hidden-narrow"),
    ("softmax", "overflow-512x1000"),
    ("softmax", "wide-16x32768"),
    ("softmax", "hidden-long-rows"),
]


@pytest.mark.parametrize(("lab_id", "case"), HONEST_CASES)
def test_honest_float_evaluations_stay_well_inside_the_tolerance(lab_id: str, case: str) -> None:
    lab = load_builtin_lab(lab_id)
    worst = HONEST[lab_id](lab, case, np.random.default_rng(17))
    assert worst, f"{lab_id}: nothing simulated"
    # Half the tolerance at most on any case: the rest is the margin for orders and data not
    # simulated here (the bound itself sits far out in the tail of the error's distribution).
    assert max(worst.values()) < 0.6, worst


def test_one_float_accumulator_stays_under_the_bound_in_many_random_orders() -> None:
    """The tail of a single accumulator's error (array-sum-atomic's worst honest kernel): 20000
    random orders of 1000 values in [-1, 1), against 10 u s sqrt(2 D) = 10 u sqrt(n (n+1)/3)."""
    rng = np.random.default_rng(3)
    n = 1000
    values = rng.uniform(-1, 1, (20000, n)).astype(F32)
    got = random_order(values, rng).astype(np.float64)
    exact = values.astype(np.float64).sum(axis=1)
    bound = 10 * U32 * math.sqrt(n * (n + 1) / 3)
    assert np.abs(got - exact).max() < 0.3 * bound
    lab = load_builtin_lab("array-sum-atomic")
    assert lab.tolerance["float32"].for_case({"n": n}) == (pytest.approx(bound), 0.0)


# The case each lab's probes are simulated on: the timed one, where the probes must fail,
# except where that is too large for CI and any case shows the same (the output is checked
# element by element, or compared exactly); bench/honest_error.py runs them all.
PROBE_CASES = {
    "vector-scale": "n-1048579",
    "hadamard": "n-1048579",
    "array-sum": "n-8388608",
    "array-sum-atomic": "n-8388608",
    "dot-product": "n-1048583",
    "matmul-naive": "square-1023",
    "matmul-tiled": "square-2048",
    "matmul-coarsened": "rect-1000x777x1025",
    "matmul-tiled-f64": "square-1023",
    "matmul-tiled-int": "rect-63x65x70",
    "conv1d-tiled": "n-1048579-r8",
    "conv2d": "1023x1023-r3",
    "matrix-transpose": "rect-1000x3001",
    "softmax": "wide-16x32768",
    "histogram": "skewed-1048579",
    "prefix-sum": "n-1048576",
}


@pytest.mark.parametrize("lab_id", sorted(PROBE_CASES))
def test_every_shortcut_probe_misses_by_hundreds_of_tolerances(lab_id: str) -> None:
    lab = load_builtin_lab(lab_id)
    rows = 16 if lab_id.startswith("matmul") else None
    misses = {k: shortcut_miss(lab, PROBE_CASES[lab_id], k, rows=rows) for k in PROBE_KINDS}
    assert min(misses.values()) > 300, misses


def test_the_sum_labs_probes_miss_their_hidden_large_cases_too() -> None:
    for lab_id in ("array-sum", "array-sum-atomic"):
        lab = load_builtin_lab(lab_id)
        misses = {k: shortcut_miss(lab, "hidden-large", k) for k in PROBE_KINDS}
        assert min(misses.values()) > 30, (lab_id, misses)


def test_the_old_positive_data_let_every_shortcut_through_the_timed_case() -> None:
    # The lab before issue 17 (a sample under tests/graders/labcheck/samples): data in
    # [0.5, 1.5) and a tolerance wide enough for one accumulator, so half the work plus the
    # mean, every other element counted twice, and the constant n all pass the 8 Mi case.
    lab = load_lab(LOOSE_LAB)
    timed = lab.timing.case if lab.timing else ""
    misses = {k: shortcut_miss(lab, timed, k) for k in PROBE_KINDS}
    assert max(misses.values()) < 0.5, misses
    assert shortcut_miss(lab, "n-1000", "constant") > 1  # caught only on a small case


def _array_sum(src: np.ndarray, *, whole_grid_only: bool = False) -> float:
    """array-sum's two launches with trees, as shared_tree.cu adds."""
    blocks = min(1024, -(-src.size // 1024))
    if whole_grid_only:  # one element per thread: the tail past the grid is never added
        src = src[: blocks * 1024]
    partial = np.zeros((1, 1024), F32)
    partial[0, :blocks] = tree(grid_stride(src, blocks * 1024).reshape(blocks, 1024))
    return float(tree(partial)[0])


def _tolerances(lab: LabSpec, case: str, got: float, exact: float) -> float:
    names = lab.sizes_for(case)
    return ratio(lab, "float32", names, got, exact)


def test_array_sum_tolerance_catches_the_lost_tail_at_2_20_plus_3() -> None:
    lab = load_builtin_lab("array-sum")
    names, data, _ = case_data(lab, "n-1048579")
    src = data["src"]
    exact = exact_sum(src)
    # faulty/one_element_per_thread.cu drops the last 3 elements (0.60 on this case's data).
    assert _tolerances(lab, "n-1048579", _array_sum(src, whole_grid_only=True), exact) > 20
    assert _tolerances(lab, "n-1048579", _array_sum(src), exact) < 0.01
    # ...and right with one element per thread where the grid covers the array.
    names, data, _ = case_data(lab, "n-1000")
    assert _array_sum(data["src"], whole_grid_only=True) == _array_sum(data["src"])


def test_array_sum_tolerance_catches_one_element_per_thread_on_the_large_case() -> None:
    lab = load_builtin_lab("array-sum")
    _, data, _ = case_data(lab, "n-8388608")
    src = data["src"]
    dropped = _array_sum(src, whole_grid_only=True)  # 7 of every 8 elements are lost
    assert _tolerances(lab, "n-8388608", dropped, exact_sum(src)) > 1000


def test_atomic_tolerance_catches_a_lost_block_of_the_1000_element_case() -> None:
    lab = load_builtin_lab("array-sum-atomic")
    _, data, _ = case_data(lab, "n-1000")
    src = data["src"]
    exact = exact_sum(src)
    assert _tolerances(lab, "n-1000", float(sequential(src[256:])), exact) > 100
    assert _tolerances(lab, "n-1000", float(sequential(src)), exact) < 0.1


def test_dot_product_tolerance_catches_three_missing_products() -> None:
    lab = load_builtin_lab("dot-product")
    names, data, _ = case_data(lab, "n-1048583")
    products = data["a"] * data["b"]
    exact = float(products.sum())
    forgot = float(products[: names["n"] // 4 * 4].sum())  # faulty/forgets_tail.cu
    assert ratio(lab, "float64", names, forgot, exact) > 1e5
    # Even one loop over all n products (deeper than the lab's blocks allow) stays inside.
    assert ratio(lab, "float64", names, float(np.cumsum(products)[-1]), exact) < 0.1
    names, _, _ = case_data(lab, "n-10000")
    assert names["n"] % 4 == 0  # forgets_tail.cu passes here, as its header says


def test_matmul_f64_tolerance_catches_float_tiles() -> None:
    lab = load_builtin_lab("matmul-tiled-f64")
    names, data, _ = case_data(lab, "square-64")
    a, b = data["A"], data["B"]
    exact = a @ b
    rounded = a.astype(F32).astype(np.float64) @ b.astype(F32).astype(np.float64)
    atol, rtol = lab.tolerance["float64"].for_case(names)
    wrong = np.abs(rounded - exact) > atol + rtol * np.abs(exact)
    assert wrong.mean() > 0.99  # faulty/float_tiles.cu fails on nearly every element


def test_matmul_tolerance_catches_the_skipped_partial_tile() -> None:
    lab = load_builtin_lab("matmul-tiled")
    names, data, _ = case_data(lab, "square-1023")
    a, b = data["A"][:32].astype(np.float64), data["B"].astype(np.float64)
    whole = (names["N"] // 32) * 32  # faulty/no_bounds_check.cu adds only whole tiles
    got = a[:, :whole] @ b[:whole]
    exact = a @ b
    atol, rtol = lab.tolerance["float32"].for_case(names)
    assert (np.abs(got - exact) > atol + rtol * np.abs(exact)).mean() > 0.99


def test_conv1d_tolerance_catches_a_tile_without_halo() -> None:
    lab = load_builtin_lab("conv1d-tiled")
    names, data, _ = case_data(lab, "n-1000-r3")
    x, mask = data["in"].astype(np.float64), data["mask"].astype(np.float64)
    n, r, block = names["n"], names["R"], 256
    padded = np.pad(x, r)
    exact = sum(mask[j] * padded[j : j + n] for j in range(2 * r + 1))
    no_halo = np.zeros(n)
    for i in range(n):
        start = i // block * block
        for j in range(2 * r + 1):
            k = i + j - r
            if start <= k < min(start + block, n):
                no_halo[i] += mask[j] * x[k]
    atol, rtol = lab.tolerance["float32"].for_case(names)
    wrong = np.abs(no_halo - exact) > atol + rtol * np.abs(exact)
    # Every output within R of an inner block edge is wrong (3 edges, 2R outputs each).
    assert int(wrong.sum()) >= 3 * 2 * r - 2
