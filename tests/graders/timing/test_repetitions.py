"""Timing statistics and the stopping rule (the GPU part is in tests/graders/gpu/)."""

from __future__ import annotations

import math

import pytest

from graders.timing import repetitions as timing


def test_stats_from_samples() -> None:
    s = timing.stats_from_samples([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s.median_ms == 3.0 and s.min_ms == 1.0 and s.reps == 5
    assert math.isclose(s.mean_ms, 22.0)
    assert s.stdev_ms > 0 and s.rse > 0


def test_relative_standard_error() -> None:
    assert timing.relative_standard_error([1.0]) == math.inf
    assert timing.relative_standard_error([2.0, 2.0, 2.0]) == 0.0
    # stdev 1, n 4, mean 2.5 -> se 0.5 (sample stdev of 1,2,3,4 is 1.29)
    rse = timing.relative_standard_error([1.0, 2.0, 3.0, 4.0])
    assert math.isclose(rse, (1.2909944487358056 / 2) / 2.5)


def test_no_samples_is_an_error() -> None:
    with pytest.raises(ValueError):
        timing.stats_from_samples([])


def test_plan_stops_on_tight_mean_after_min_reps() -> None:
    plan = timing.TimingPlan(budget_seconds=3.0, target_rse=0.01, min_reps=10, max_reps=500)
    tight = [1.0] * 9
    assert not plan.done(tight, 0.1)  # fewer than min_reps
    assert plan.done([*tight, 1.0], 0.1)  # rse 0 < 1 %


def test_plan_keeps_going_while_noisy_then_stops_on_budget() -> None:
    plan = timing.TimingPlan(budget_seconds=3.0, target_rse=0.01, min_reps=10, max_reps=500)
    noisy = [1.0, 2.0] * 10
    assert not plan.done(noisy, 1.0)
    assert plan.done(noisy, 3.5)


def test_plan_takes_two_samples_even_with_min_reps_one() -> None:
    # A slow kernel spends the budget on its first sample; one sample's rse is inf.
    plan = timing.TimingPlan(budget_seconds=0.1, target_rse=0.01, min_reps=1, max_reps=500)
    assert not plan.done([5.0], 10.0)
    assert plan.done([5.0, 5.5], 10.0)
    assert math.isfinite(timing.stats_from_samples([5.0, 5.5]).rse)


def test_plan_stops_at_max_reps() -> None:
    plan = timing.TimingPlan(budget_seconds=100.0, target_rse=0.0, min_reps=2, max_reps=30)
    assert plan.done([1.0, 2.0] * 15, 0.0)


def test_warm_up_ends_on_busy_time_wall_time_or_count() -> None:
    plan = timing.TimingPlan()
    assert not plan.warmed_up(0, 2, busy_ms=1000.0, wall_s=100.0)  # at least one always runs
    assert not plan.warmed_up(1, 2, busy_ms=1000.0, wall_s=0.5)  # the drawn ones run...
    assert plan.warmed_up(1, 2, busy_ms=1000.0, wall_s=1.0)  # ...unless their wall time is up
    assert not plan.warmed_up(3, 2, busy_ms=10.0, wall_s=0.1)  # a fast kernel: keep warming
    assert plan.warmed_up(3, 2, busy_ms=60.0, wall_s=0.1)  # the GPU was busy 50 ms
    # A slow check per repetition (a Python oracle): a second of wall time is enough.
    assert plan.warmed_up(3, 2, busy_ms=1.0, wall_s=1.2)
    assert plan.warmed_up(52, 2, busy_ms=1.0, wall_s=0.5)  # at most 50 more than drawn
