"""Scoring at its limits: exactly at a reference's time and past it, and every sentence whole.

Written against the survivors of scripts/mutation.py (graders/scoring).
"""

from __future__ import annotations

import math

import pytest

from graders.results import CaseResult
from graders.scoring import points as scoring

fraction = scoring.performance_fraction


def _case(name: str, verdict: str, points: float = 10.0) -> CaseResult:
    return CaseResult(
        name=name,
        sizes={"n": 1},
        hidden=False,
        passed=verdict == "pass",
        verdict=verdict,
        message="",
        max_points=points,
    )


def _perf(**kw: object) -> scoring.PerformanceScore:
    args: dict[str, object] = dict(
        max_points=20.0,
        all_passed=True,
        time_ms=2.0,
        reference_ms={"naive": 8.0, "tiled": 2.0},
        baseline="naive",
        target="tiled",
    )
    args.update(kw)
    return scoring.performance_score(**args)  # type: ignore[arg-type]


def test_a_time_that_is_not_a_time_earns_nothing() -> None:
    for bad in (0.0, -1.0, math.nan, math.inf):
        assert fraction(bad, baseline_ms=8.0, target_ms=2.0) == 0.0, bad


def test_the_scale_is_logarithmic_between_any_two_references() -> None:
    # Halfway in log time between 8 ms and 2 ms is 4 ms.
    assert fraction(4.0, baseline_ms=8.0, target_ms=2.0) == pytest.approx(0.5)
    assert fraction(2.0, baseline_ms=8.0, target_ms=2.0) == 1.0
    assert fraction(8.0, baseline_ms=8.0, target_ms=2.0) == 0.0
    # References in the wrong order give nothing above the target.
    assert fraction(3.0, baseline_ms=2.0, target_ms=2.0) == 0.0


def test_a_lab_without_performance_points_says_nothing() -> None:
    none = _perf(max_points=0.0)
    assert (none.points, none.sentence, none.pending, none.impossible) == (0.0, "", False, False)


def test_half_a_point_of_performance_is_given() -> None:
    half = _perf(max_points=0.5, time_ms=2.0)
    assert half.points == 0.5
    assert half.sentence == (
        "Median 2 ms against naive 8 ms and tiled 2 ms: 0.5 of 0.5 performance points."
    )


def test_every_sentence_without_points_whole() -> None:
    failed = _perf(all_passed=False)
    assert (failed.points, failed.sentence) == (
        0.0,
        "No performance points: they are given only when every case passes.",
    )
    untimed = _perf(time_ms=None)
    assert (untimed.points, untimed.sentence) == (
        0.0,
        "No performance points: the kernel could not be timed.",
    )
    under = _perf(time_ms=0.05, floor_ms=0.1)
    assert under.sentence == (
        "No performance points: a median of 0.05 ms is less than this GPU needs to move the "
        "lab's data or do its arithmetic (0.1 ms at the least), so the timing cannot be right; "
        "the course staff will look at it."
    )


def test_a_missing_reference_is_named_the_baseline_first() -> None:
    both = _perf(reference_ms={})
    assert both.sentence == "No performance points: the reference 'naive' could not be timed."
    target = _perf(reference_ms={"naive": 8.0})
    assert target.sentence == "No performance points: the reference 'tiled' could not be timed."
    base = _perf(reference_ms={"tiled": 2.0})
    assert base.sentence == "No performance points: the reference 'naive' could not be timed."


def test_points_are_rounded_to_hundredths() -> None:
    # A third of the way in log time from 8 ms to 1 ms: 4 ms; 20 / 3 points.
    third = _perf(time_ms=4.0, reference_ms={"naive": 8.0, "tiled": 1.0})
    assert third.points == 6.67


def test_the_speedup_phrase_at_and_around_one() -> None:
    refs = {"naive": 2.0}
    assert scoring.speedup_phrase(2.0, refs, "naive") == "1x faster than the naive kernel"
    assert scoring.speedup_phrase(8.0, refs, "naive") == "4x slower than the naive kernel"
    assert scoring.speedup_phrase(0.5, refs, "naive") == "4x faster than the naive kernel"
    assert scoring.speedup_phrase(1.0, refs, "naive", spread=0.25) == (
        "2x faster than the naive kernel (± 25.0 %)"
    )
    assert scoring.speedup_phrase(1.0, refs, "naive", spread=math.inf) == (
        "2x faster than the naive kernel"
    )


def test_no_speedup_phrase_without_a_baseline_or_a_time() -> None:
    assert scoring.speedup_phrase(0.0, {"naive": 2.0}, "naive") == ""
    assert scoring.speedup_phrase(1.0, {}, "naive") == ""
    assert scoring.speedup_phrase(1.0, {"naive": 0.0}, "naive") == ""


def test_summaries_whole() -> None:
    perf = scoring.PerformanceScore(0.0, "")
    both = [_case("a", "pass"), _case("b", "pass")]
    assert scoring.summary_sentence(both, perf) == "All 2 cases passed."
    some = [_case("a", "pass"), _case("b", "wrong_answer"), _case("c", "not_run")]
    assert scoring.summary_sentence(some, perf) == (
        "1 of 3 cases passed; the first failure is b (wrong answer); 1 not run."
    )
    none_run = [_case("a", "not_run"), _case("b", "not_run")]
    assert scoring.summary_sentence(none_run, perf) == "0 of 2 cases passed; 2 not run."
    assert scoring.summary_sentence([], perf) == "0 of 0 cases passed."
