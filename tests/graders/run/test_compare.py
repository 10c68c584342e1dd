"""The comparison that decides pass or fail, on NumPy arrays (no GPU)."""

from __future__ import annotations

import numpy as np

from graders.run import compare


def test_sentinel_is_recognised_and_not_confused_with_a_computed_nan() -> None:
    got = compare.sentinel_array(np.dtype(np.float32), (3,))
    got[1] = np.nan  # a NaN the kernel computed
    assert compare.sentinel_mask(got).tolist() == [True, False, True]


def test_integer_sentinel() -> None:
    got = compare.sentinel_array(np.dtype(np.int32), (2, 2))
    got[0, 0] = 7
    assert compare.sentinel_mask(got).sum() == 3


def test_matching_floats_within_tolerance_pass() -> None:
    expected = np.linspace(-1, 1, 12).reshape(3, 4)
    got = (expected + 1e-7).astype(np.float32)
    cmp = compare.compare_elementwise(got, expected, atol=1e-5, rtol=1e-4)
    assert cmp.ok and cmp.wrong_count == 0
    assert cmp.max_abs_error is not None and cmp.max_abs_error < 1e-5


def test_first_wrong_index_is_row_and_column() -> None:
    expected = np.ones((4, 5))
    got = np.ones((4, 5), dtype=np.float32)
    got[2, 3] = 5.0
    got[3, 0] = 7.0
    cmp = compare.compare_elementwise(got, expected, atol=1e-5, rtol=1e-5)
    assert not cmp.ok
    assert cmp.wrong_count == 2
    assert cmp.first_wrong_index == (2, 3)
    assert cmp.expected == 1.0 and cmp.got == 5.0
    text = compare.describe(cmp, "C")
    assert "2 of 20 elements of C are wrong" in text
    assert "C[2, 3]" in text and "expected 1" in text and "got 5" in text


def test_unwritten_output_is_no_output() -> None:
    expected = np.ones(8)
    got = compare.sentinel_array(np.dtype(np.float32), (8,))
    cmp = compare.compare_elementwise(got, expected, atol=1e-5, rtol=1e-5)
    assert not cmp.ok and cmp.unwritten_count == 8
    assert "wrote nothing" in compare.describe(cmp, "dst")


def test_zero_output_does_not_pass_a_nonzero_answer() -> None:
    expected = np.full(4, 0.5)
    cmp = compare.compare_elementwise(np.zeros(4, np.float32), expected, atol=1e-5, rtol=1e-5)
    assert not cmp.ok and cmp.wrong_count == 4


def test_nan_and_inf_are_wrong() -> None:
    expected = np.ones(3)
    got = np.array([1.0, np.nan, np.inf], dtype=np.float32)
    cmp = compare.compare_elementwise(got, expected, atol=1e-3, rtol=0)
    assert cmp.wrong_count == 2 and cmp.first_wrong_index == (1,)


def test_integers_are_exact() -> None:
    expected = np.arange(6, dtype=np.int64)
    got = np.arange(6, dtype=np.int32)
    assert compare.compare_elementwise(got, expected, atol=10, rtol=10).ok
    got[5] = 4
    cmp = compare.compare_elementwise(got, expected, atol=0, rtol=0)
    assert not cmp.ok and cmp.first_wrong_index == (5,)


def test_sum_check_sums_partials() -> None:
    partial = np.array([1.0, 2.0, 3.5], dtype=np.float32)
    assert compare.compare_sum(partial, 6.5, atol=1e-6, rtol=0).ok
    bad = compare.compare_sum(partial, 7.0, atol=1e-6, rtol=0)
    assert not bad.ok and bad.got == 6.5
    assert "sum of partial is wrong" in compare.describe(bad, "partial", check="sum")


def test_sum_check_with_an_unwritten_partial() -> None:
    partial = compare.sentinel_array(np.dtype(np.float64), (4,))
    partial[0] = 1.0
    cmp = compare.compare_sum(partial, 1.0, atol=1e-6, rtol=0)
    assert not cmp.ok and cmp.got is None and cmp.unwritten_count == 3
    assert "never written" in compare.describe(cmp, "partial", check="sum")


def test_sum_check_with_a_nan_partial_is_wrong_and_says_so() -> None:
    cmp = compare.compare_sum(np.array([1.0, np.nan]), 1.0, atol=1e-6, rtol=0)
    assert not cmp.ok and cmp.max_abs_error == float("inf") and cmp.max_rel_error is None
    assert "got NaN" in compare.describe(cmp, "partial", check="sum")


def test_an_infinity_of_the_wrong_sign_is_wrong() -> None:
    expected = np.array([np.inf, -np.inf, 2.0])
    got = np.array([np.inf, np.inf, 2.0], dtype=np.float32)
    cmp = compare.compare_elementwise(got, expected, atol=1e-3, rtol=1e-3)
    assert cmp.wrong_count == 1 and cmp.first_wrong_index == (1,)


def test_half_width_floats_are_compared_as_their_values() -> None:
    from graders.run.host_dtypes import bfloat16_bits

    expected = np.array([1.0, -2.5, 3.0e-3, 1000.0])
    half = expected.astype(np.float16)
    assert compare.compare_elementwise(half, expected, atol=1e-3, rtol=1e-3).ok
    brain = bfloat16_bits(expected.astype(np.float32))  # uint16 bits, as the run stage holds it
    assert compare.is_float_data(brain.dtype) and not compare.is_float_data(np.uint8)
    assert np.array_equal(compare.widen(brain), [1.0, -2.5, 0.00300598144531250, 1000.0])
    assert compare.compare_elementwise(brain, expected, atol=1e-3, rtol=1e-2).ok
    brain[3] = bfloat16_bits(np.array([1024.0], np.float32))[0]
    cmp = compare.compare_elementwise(brain, expected, atol=1e-3, rtol=1e-2)
    assert not cmp.ok and cmp.first_wrong_index == (3,) and cmp.got == 1024.0
    assert compare.compare_sum(brain, 1022.5 + 0.0030059814453125, atol=1e-9, rtol=0).ok


def test_half_width_sentinels_are_nans_no_arithmetic_makes() -> None:
    for dtype in (np.dtype(np.float16), np.dtype(np.uint16)):
        got = compare.sentinel_array(dtype, (4,))
        assert compare.is_float_data(dtype) and np.isnan(compare.widen(got)).all()
        got[1] = 0x7FFF if dtype == np.uint16 else np.float16(np.nan)  # a computed NaN
        assert compare.sentinel_mask(got).tolist() == [True, False, True, True]
        guard = compare.guard_value(dtype)
        assert guard != compare.SENTINEL_BITS[dtype]
        cmp = compare.compare_elementwise(got, np.ones(4), atol=0, rtol=0)
        assert cmp.unwritten_count == 3 and cmp.wrong_count == 4


def test_a_byte_equal_to_the_sentinel_where_that_is_the_answer_passes() -> None:
    sentinel = int(compare.SENTINEL_INTS[np.dtype(np.uint8)])
    expected = np.array([sentinel, 1, 2], dtype=np.int64)
    got = np.array([sentinel, 1, 2], dtype=np.uint8)
    assert not compare.knows_unwritten(np.uint8)
    assert compare.compare_elementwise(got, expected, atol=0, rtol=0).ok
    never = compare.sentinel_array(np.dtype(np.uint8), (3,))
    cmp = compare.compare_elementwise(never, expected, atol=0, rtol=0)
    assert cmp.wrong_count == 2 and cmp.unwritten_count == 2  # the first one cannot be told
    # A byte guard lies outside the data where it can, and is a byte the data take otherwise.
    assert compare.guard_value(np.dtype(np.uint8), (0, 100)) == 0xA5
    assert compare.guard_value(np.dtype(np.uint8), (0, 255)) == 0xF5
