"""Each lab's tolerance, on its own generated data, passes what a correct kernel computes and
fails the mistakes its page names and its faulty/ kernels make (simulated with NumPy).

Kernels are simulated in float32 the way they add: per-thread grid-stride sums, then a
pairwise tree (shared memory or warp shuffles), or one value after another (a loop in thread
0). Figures quoted in the lab.toml comments come from these simulations.
"""

from __future__ import annotations

import numpy as np
import pytest

from graders.run.inputs import case_seed, generate_arrays
from graders.spec import LabSpec, load_builtin_lab

F32 = np.float32


def _data(lab: LabSpec, case: str) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    names = lab.sizes_for(case)
    return names, generate_arrays(lab.params, names, case_seed(lab.id, case, hidden=False))


def _bound(lab: LabSpec, dtype: str, names: dict[str, float], exact: float) -> float:
    atol, rtol = lab.tolerance[dtype].for_case(names)
    return atol + rtol * abs(exact)


def _thread_sums(src: np.ndarray, blocks: int, threads: int = 1024) -> np.ndarray:
    """Each thread's float32 sum of its grid-stride share, as (blocks, threads)."""
    total = blocks * threads
    per = -(-src.size // total)
    padded = np.zeros(per * total, F32)
    padded[: src.size] = src
    acc = np.zeros(total, F32)
    for row in padded.reshape(per, total):
        acc += row
    return acc.reshape(blocks, threads)


def _tree(values: np.ndarray) -> np.ndarray:
    """The pairwise halving of shared_tree.cu over the last axis (a power of two), in float32."""
    v = values.astype(F32, copy=True)
    half = v.shape[-1] // 2
    while half:
        v[..., :half] += v[..., half : 2 * half]
        half //= 2
    return v[..., 0]


def _in_order(values: np.ndarray) -> np.ndarray:
    """One value after another into one float32 (a loop in thread 0)."""
    return np.cumsum(values.astype(F32), axis=-1, dtype=F32)[..., -1]


def _array_sum(src: np.ndarray, block_total, *, whole_grid_only: bool = False) -> float:  # noqa: ANN001
    """The two launches of array-sum: n -> nblocks partial sums -> one total."""
    blocks = min(1024, -(-src.size // 1024))
    if whole_grid_only:  # one element per thread: the tail past the grid is never added
        src = src[: blocks * 1024]
    partial = np.zeros((1, 1024), F32)
    partial[0, :blocks] = block_total(_thread_sums(src, blocks))
    return float(block_total(partial)[0])


def _thread0_loop(src: np.ndarray) -> float:
    """Thread 0 of each block adds its block's grid-stride share in index order, both launches."""
    blocks = min(1024, -(-src.size // 1024))
    per = -(-src.size // (blocks * 1024))
    padded = np.zeros(per * blocks * 1024, F32)
    padded[: src.size] = src
    shares = padded.reshape(per, blocks, 1024).transpose(1, 0, 2).reshape(blocks, -1)
    partial = np.zeros(1024, F32)
    partial[:blocks] = _in_order(shares)
    return float(_in_order(partial))


ARRAY_SUM_CASES = ["n-1", "n-1000", "n-1048579", "n-8388608"]


@pytest.mark.parametrize("case", ARRAY_SUM_CASES)
def test_array_sum_tolerance_admits_trees_with_a_tenfold_margin(case: str) -> None:
    lab = load_builtin_lab("array-sum")
    names, data = _data(lab, case)
    src = data["src"]
    exact = float(src.astype(np.float64).sum())
    bound = _bound(lab, "float32", names, exact)
    assert abs(_array_sum(src, _tree) - exact) <= 0.1 * bound
    # Not what the lab teaches, but right on this data: a loop in thread 0.
    assert abs(_thread0_loop(src) - exact) <= bound


def test_array_sum_tolerance_catches_the_lost_tail_at_2_20_plus_3() -> None:
    lab = load_builtin_lab("array-sum")
    names, data = _data(lab, "n-1048579")
    src = data["src"]
    exact = float(src.astype(np.float64).sum())
    bound = _bound(lab, "float32", names, exact)
    dropped = _array_sum(src, _tree, whole_grid_only=True)
    assert abs(dropped - exact) > 2 * bound  # faulty/one_element_per_thread.cu: 3.0e-6 relative
    # For any data: the 3 lost elements add up to at least 1.5, more than the bound plus a
    # tree's own error on that case (under 1.2e-7 relative in every sample we drew).
    assert bound + 1.2e-7 * exact < 1.5
    # The old tolerance let it pass.
    old = 1e-6 + (1e-6 * np.log2(names["n"] + 1) + 1e-6) * exact
    assert abs(dropped - exact) < old


def test_array_sum_tolerance_catches_one_element_per_thread_on_the_large_case() -> None:
    lab = load_builtin_lab("array-sum")
    names, data = _data(lab, "n-8388608")
    src = data["src"]
    exact = float(src.astype(np.float64).sum())
    dropped = _array_sum(src, _tree, whole_grid_only=True)
    assert abs(dropped - exact) > 0.8 * exact  # 7 of every 8 elements are lost


def test_dot_product_tolerance_catches_three_missing_products() -> None:
    lab = load_builtin_lab("dot-product")
    names, data = _data(lab, "n-1048583")
    products = data["a"] * data["b"]
    exact = float(products.sum())
    bound = _bound(lab, "float64", names, exact)
    assert abs(float(np.cumsum(products)[-1]) - exact) <= 0.01 * bound  # added in order
    forgot = float(products[: names["n"] // 4 * 4].sum())  # faulty/forgets_tail.cu
    assert abs(forgot - exact) > 1000 * bound
    names, data = _data(lab, "n-10000")
    assert names["n"] % 4 == 0  # forgets_tail.cu passes here, as its header says


def test_matmul_f64_tolerance_catches_float_tiles() -> None:
    lab = load_builtin_lab("matmul-tiled-f64")
    names, data = _data(lab, "square-64")
    a, b = data["A"], data["B"]
    exact = a @ b
    rounded = a.astype(F32).astype(np.float64) @ b.astype(F32).astype(np.float64)
    atol, rtol = lab.tolerance["float64"].for_case(names)
    wrong = np.abs(rounded - exact) > atol + rtol * np.abs(exact)
    assert wrong.mean() > 0.9  # faulty/float_tiles.cu fails on nearly every element


def test_matmul_tolerance_catches_the_skipped_partial_tile() -> None:
    lab = load_builtin_lab("matmul-tiled")
    names, data = _data(lab, "square-1023")
    a, b = data["A"][:32].astype(np.float64), data["B"].astype(np.float64)
    whole = (names["N"] // 32) * 32  # faulty/no_bounds_check.cu adds only whole tiles
    got = a[:, :whole] @ b[:whole]
    exact = a @ b
    atol, rtol = lab.tolerance["float32"].for_case(names)
    assert (np.abs(got - exact) > atol + rtol * np.abs(exact)).mean() > 0.9


def test_conv1d_tolerance_catches_a_tile_without_halo() -> None:
    lab = load_builtin_lab("conv1d-tiled")
    names, data = _data(lab, "n-1000-r3")
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
