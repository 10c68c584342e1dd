"""Built-in output properties, on NumPy arrays (the same code runs on CuPy arrays)."""

from __future__ import annotations

import numpy as np

from graders.run.properties import rows_sum_to_one, sorted_permutation


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_rows_sum_to_one_accepts_a_float32_softmax() -> None:
    x = np.random.default_rng(1).normal(0, 5, size=(64, 1000))
    got = _softmax(x).astype(np.float32)
    result = rows_sum_to_one(got, name="y", atol=1e-7, rtol=1e-5)
    assert result.ok, result.message


def test_rows_sum_to_one_names_the_first_bad_row() -> None:
    got = np.full((4, 10), 0.1, np.float32)
    got[2, 3] = 0.5
    got[3, 0] = np.nan
    result = rows_sum_to_one(got, name="y", atol=1e-7, rtol=1e-5)
    assert not result.ok
    assert result.message.startswith("2 of 4 rows of y do not sum to 1")
    assert "row 2, which sums to 1.4" in result.message


def test_sorted_permutation() -> None:
    source = np.array([3, 1, 2, 2, 9], np.int32)
    ok = sorted_permutation(np.array([1, 2, 2, 3, 9], np.int32), source, name="y", of="x")
    assert ok.ok, ok.message
    unsorted = sorted_permutation(np.array([1, 2, 3, 2, 9], np.int32), source, name="y", of="x")
    assert not unsorted.ok and "y[2] = 3 comes before y[3] = 2" in unsorted.message
    lost = sorted_permutation(np.array([1, 2, 3, 3, 9], np.int32), source, name="y", of="x")
    assert not lost.ok
    assert "y[2] is 3, but the element of x that belongs there is 2" in lost.message


def test_sorted_permutation_of_floats_puts_nan_last() -> None:
    source = np.array([0.5, np.nan, -1.0], np.float32)
    assert sorted_permutation(
        np.array([-1.0, 0.5, np.nan], np.float32), source, name="y", of="x"
    ).ok
    early = sorted_permutation(np.array([np.nan, -1.0, 0.5], np.float32), source, name="y", of="x")
    assert not early.ok and "not in ascending order" in early.message
