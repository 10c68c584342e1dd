"""The comparison at its limits: exactly at the tolerance and one step past, sums, empty and
one-element outputs, what is reported of the first wrong element, and every sentence whole.

Written against the survivors of scripts/mutation.py (graders/run/compare.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from graders.run import compare
from graders.run.compare import Comparison, compare_elementwise, compare_sum, describe

SENTINEL32 = compare.sentinel_array(np.dtype(np.float32), (1,))[0]


def test_exactly_at_the_tolerance_passes_and_the_next_float_fails() -> None:
    want = np.array([4.0])
    at = np.array([4.5], dtype=np.float64)  # |4.5 - 4| = 0.5 = 0.25 + 0.0625 * 4
    assert compare_elementwise(at, want, atol=0.25, rtol=0.0625).ok
    past = np.array([np.nextafter(4.5, 5.0)])
    assert not compare_elementwise(past, want, atol=0.25, rtol=0.0625).ok
    # rtol scales with |expected|, not with its inverse: 8 * 0.5 allows 4 off 8.
    assert compare_elementwise(np.array([12.0]), np.array([8.0]), atol=0.0, rtol=0.5).ok


def test_the_errors_reported_are_the_largest_absolute_and_relative() -> None:
    want = np.array([2.0, 100.0, -4.0])
    got = np.array([2.5, 101.0, -4.0], dtype=np.float32)
    cmp = compare_elementwise(got, want, atol=0.0, rtol=1.0)
    assert cmp == Comparison(ok=True, total=3, max_abs_error=1.0, max_rel_error=0.25)
    assert (
        describe(cmp, "y") == "y matches the expected answer (max abs error 1, max rel error 0.25)."
    )


def test_an_expected_zero_has_no_relative_error_and_an_infinite_one_is_reported() -> None:
    cmp = compare_elementwise(np.array([0.5]), np.array([0.0]), atol=1.0, rtol=0.0)
    assert cmp.ok and cmp.max_abs_error == 0.5 and cmp.max_rel_error is None
    assert (
        describe(cmp, "y") == "y matches the expected answer (max abs error 0.5, max rel error 0)."
    )
    inf = compare_elementwise(np.array([np.inf, 1.0]), np.array([1.0, 1.0]), atol=0.0, rtol=0.0)
    assert (inf.ok, inf.max_abs_error, inf.max_rel_error) == (False, math.inf, 0.0)
    assert (
        describe(inf, "y")
        == "1 of 2 elements of y are wrong; the first is y[0]: expected 1, got inf."
    )


def test_the_first_wrong_element_in_a_matrix_with_what_was_expected_and_what_came() -> None:
    want = np.arange(6, dtype=np.float64).reshape(2, 3)
    got = want.astype(np.float32)
    got[1, 1] = 7.5
    got[1, 2] = SENTINEL32
    cmp = compare_elementwise(got, want, atol=0.0, rtol=0.0)
    assert (cmp.wrong_count, cmp.unwritten_count, cmp.first_wrong_index) == (2, 1, (1, 1))
    assert (cmp.expected, cmp.got) == (4.0, 7.5)
    assert describe(cmp, "C") == (
        "2 of 6 elements of C are wrong; the first is C[1, 1]: expected 4, got 7.5 (1 elements "
        "were never written)."
    )
    got[1, 1] = SENTINEL32
    first_unwritten = compare_elementwise(got, want, atol=0.0, rtol=0.0)
    assert first_unwritten.got is None and first_unwritten.expected == 4.0
    assert "expected 4, got nothing (never written) (2 elements were never written)." in describe(
        first_unwritten, "C"
    )


def test_an_output_of_another_shape_is_read_in_the_answers_shape() -> None:
    got = np.arange(6, dtype=np.float32)
    want = np.arange(6, dtype=np.float64).reshape(3, 2)
    want[2, 0] = 9.0
    cmp = compare_elementwise(got, want, atol=0.0, rtol=0.0)
    assert cmp.first_wrong_index == (2, 0) and cmp.total == 6


def test_empty_and_one_element_outputs() -> None:
    empty = compare_elementwise(np.zeros(0, np.float32), np.zeros(0), atol=0.0, rtol=0.0)
    assert empty == Comparison(ok=True, total=0)
    one = compare_elementwise(np.array([3.0], np.float32), np.array([2.0]), atol=0.0, rtol=0.0)
    assert (one.ok, one.total, one.wrong_count, one.first_wrong_index) == (False, 1, 1, (0,))
    assert (one.expected, one.got, one.max_abs_error, one.max_rel_error) == (2.0, 3.0, 1.0, 0.5)


def test_integers_must_be_equal_and_report_their_distance() -> None:
    want = np.array([5, 9, -3], dtype=np.int64)
    got = np.array([5, 2, -3], dtype=np.int32)
    cmp = compare_elementwise(got, want, atol=10.0, rtol=10.0)
    assert (cmp.ok, cmp.wrong_count, cmp.first_wrong_index) == (False, 1, (1,))
    assert (cmp.max_abs_error, cmp.expected, cmp.got) == (7.0, 9.0, 2.0)
    assert describe(cmp, "bins") == (
        "1 of 3 elements of bins are wrong; the first is bins[1]: expected 9, got 2; max abs "
        "error 7."
    )
    big = np.array([2**53 + 1], dtype=np.int64)
    assert not compare_elementwise(big - 1, big, atol=0.0, rtol=0.0).ok


def test_a_sum_at_its_tolerance_and_past_it() -> None:
    parts = np.array([1.0, 2.0, 5.0], dtype=np.float32)  # 8
    at = compare_sum(parts, 10.0, atol=1.0, rtol=0.1)  # |8 - 10| = 2 = 1 + 0.1 * 10
    assert at == Comparison(
        ok=True, total=1, expected=10.0, got=8.0, max_abs_error=2.0, max_rel_error=0.2
    )
    past = compare_sum(parts, 10.0, atol=1.0, rtol=0.0999)
    assert past == Comparison(
        ok=False,
        total=1,
        wrong_count=1,
        first_wrong_index=(0,),
        expected=10.0,
        got=8.0,
        max_abs_error=2.0,
        max_rel_error=0.2,
    )
    assert describe(past, "total", check="sum") == (
        "The sum of total is wrong: expected 10, got 8 (abs error 2)."
    )
    # rtol scales with |expected|: 8 off by 2 is within half of 8... and of -8's magnitude too.
    assert compare_sum(parts, 6.0, atol=0.0, rtol=0.5).ok
    assert not compare_sum(parts, -8.0, atol=0.0, rtol=0.5).ok
    zero = compare_sum(np.zeros(2, np.float32), 0.0, atol=0.0, rtol=0.0)
    assert zero.ok and zero.max_rel_error is None and zero.wrong_count == 0


def test_a_sum_with_unwritten_or_infinite_partial_sums() -> None:
    parts = np.array([1.0, SENTINEL32, SENTINEL32], dtype=np.float32)
    cmp = compare_sum(parts, 3.0, atol=0.0, rtol=0.0)
    assert cmp == Comparison(
        ok=False, total=1, wrong_count=1, unwritten_count=2, first_wrong_index=(1,), expected=3.0
    )
    assert describe(cmp, "partial", check="sum") == (
        "2 of the partial sums in partial were never written (the first is partial[1]); every "
        "block must write its partial sum."
    )
    nameless = Comparison(ok=False, total=1, unwritten_count=1)
    assert "(the first is partial[0])" in describe(nameless, "partial", check="sum")
    inf = compare_sum(np.array([1.0, np.inf], np.float32), 3.0, atol=0.0, rtol=0.0)
    assert (inf.ok, inf.max_abs_error, inf.max_rel_error) == (False, math.inf, None)


def test_a_sentence_for_an_output_never_written() -> None:
    cmp = Comparison(ok=False, total=4, wrong_count=4, unwritten_count=4)
    assert describe(cmp, "y") == (
        "The kernel wrote nothing into y: every element still holds the sentinel."
    )
    assert describe(Comparison(ok=True, total=0), "y") == "y matches the expected answer."


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "nothing (never written)"),
        (math.nan, "NaN"),
        (3.0, "3"),
        (-2.0, "-2"),
        (2.5, "2.5"),
        (999999999999999.0, "999999999999999"),
        (1e15, "1e+15"),
        (1 / 3, "0.3333333"),
    ],
)
def test_numbers_in_sentences(value: float | None, shown: str) -> None:
    assert compare._fmt(value) == shown


def test_integers_widen_to_int64_and_floats_to_float64() -> None:
    assert compare.widen(np.array([3], np.int32)).dtype == np.int64
    assert compare.widen(np.array([3], np.uint8)).dtype == np.int64
    assert compare.widen(np.array([0.5], np.float16)).dtype == np.float64
    bf16_one = np.array([0x3F80], np.uint16)  # bfloat16 bits of 1.0
    widened = compare.widen(bf16_one)
    assert widened.dtype == np.float64 and widened[0] == 1.0


def test_a_guard_for_integers_is_a_value_the_data_never_takes() -> None:
    int32 = np.dtype(np.int32)
    first, second, last = (0x5A5A5A5A, -0x5A5A5A5B, 0x7FFFFFF5)

    def chosen(taken: tuple[float, float] | None) -> int:
        bits = compare.guard_value(int32, taken)
        return int(np.array(bits).view(np.int32))

    assert chosen(None) == first
    assert chosen((0, 100)) == first
    assert chosen((first, first + 1)) == second  # the data's low end is the first candidate
    assert chosen((first - 1, first)) == second  # ...its high end
    assert chosen((-(2**31), 2**31 - 1)) == last  # every value taken: the last candidate


def test_the_relative_error_leaves_out_expected_zeros() -> None:
    cmp = compare_elementwise(
        np.array([0.5, 2.5], np.float32), np.array([0.0, 2.0]), atol=1.0, rtol=0.0
    )
    assert (cmp.ok, cmp.max_abs_error, cmp.max_rel_error) == (True, 0.5, 0.25)
