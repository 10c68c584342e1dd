"""Points: correctness per case, performance on a log scale between two references."""

from __future__ import annotations

import math

from graders.results import CaseResult
from graders.scoring import points as scoring


def _case(name: str, passed: bool, points: float) -> CaseResult:
    return CaseResult(
        name=name,
        sizes={"n": 1},
        hidden=False,
        passed=passed,
        verdict="pass" if passed else "wrong_answer",
        message="",
        max_points=points,
    )


def test_correctness_points_count_passed_cases_only() -> None:
    cases = [_case("a", True, 10), _case("b", False, 5), _case("c", True, 2.5)]
    assert scoring.correctness_points(cases) == 12.5


def test_performance_fraction_is_linear_in_log_time() -> None:
    f = scoring.performance_fraction
    assert f(1.0, baseline_ms=10.0, target_ms=1.0) == 1.0
    assert f(0.5, baseline_ms=10.0, target_ms=1.0) == 1.0
    assert f(10.0, baseline_ms=10.0, target_ms=1.0) == 0.0
    assert f(20.0, baseline_ms=10.0, target_ms=1.0) == 0.0
    assert math.isclose(f(math.sqrt(10), baseline_ms=10.0, target_ms=1.0), 0.5)


def test_no_performance_points_unless_every_case_passes() -> None:
    perf = scoring.performance_score(
        max_points=20,
        all_passed=False,
        time_ms=0.1,
        reference_ms={"naive": 1, "tiled": 0.5},
        baseline="naive",
        target="tiled",
    )
    assert perf.points == 0 and "every case passes" in perf.sentence


def test_performance_points_between_references() -> None:
    perf = scoring.performance_score(
        max_points=20,
        all_passed=True,
        time_ms=2.0,
        reference_ms={"naive": 4.0, "tiled": 1.0},
        baseline="naive",
        target="tiled",
    )
    assert perf.points == 10.0
    assert "10 of 20" in perf.sentence


def test_missing_reference_time_gives_no_points_and_says_which() -> None:
    perf = scoring.performance_score(
        max_points=20,
        all_passed=True,
        time_ms=2.0,
        reference_ms={"naive": 4.0},
        baseline="naive",
        target="tiled",
    )
    assert perf.points == 0 and "tiled" in perf.sentence


def test_summary_names_the_first_failure() -> None:
    cases = [_case("square-1024", True, 10), _case("square-1023", False, 10)]
    perf = scoring.PerformanceScore(0.0, "")
    text = scoring.summary_sentence(cases, perf)
    assert text.startswith("1 of 2 cases passed") and "square-1023 (wrong answer)" in text
    assert scoring.summary_sentence([cases[0]], perf, "2x faster than the naive kernel") == (
        "All 1 cases passed; 2x faster than the naive kernel."
    )


def test_summary_keeps_a_hidden_failure_to_pass_or_fail() -> None:
    hidden = _case("hidden-large", False, 10)
    hidden.hidden, hidden.verdict = True, "out_of_bounds_write"
    text = scoring.summary_sentence(
        [_case("square-64", True, 10), hidden], scoring.PerformanceScore(0.0, "")
    )
    assert "hidden-large (a hidden case)" in text
    assert "out of bounds" not in text


def _perf(**kw: object) -> scoring.PerformanceScore:
    args: dict[str, object] = dict(
        max_points=20.0,
        all_passed=True,
        time_ms=2.0,
        reference_ms={"naive": 3.0, "tiled": 2.0},
        baseline="naive",
        target="tiled",
    )
    args.update(kw)
    return scoring.performance_score(**args)  # type: ignore[arg-type]


def test_a_contended_timing_holds_the_points_back() -> None:
    held = _perf(contended=True)
    assert held.points == 0.0 and held.pending and not held.impossible
    assert held.sentence == scoring.PENDING_SENTENCE
    assert _perf().points == 20.0 and not _perf().pending


def test_a_median_under_the_floor_gets_nothing_and_exactly_at_it_is_fine() -> None:
    under = _perf(time_ms=0.099, floor_ms=0.1, reference_ms={"naive": 3.0, "tiled": 2.0})
    assert under.points == 0.0 and under.impossible and "cannot be right" in under.sentence
    at = _perf(time_ms=0.1, floor_ms=0.1)
    assert at.points == 20.0 and not at.impossible


def test_the_speedup_phrase_carries_the_ratios_spread() -> None:
    said = scoring.speedup_phrase(2.0, {"naive": 3.0}, "naive", spread=0.004)
    assert said == "1.5x faster than the naive kernel (± 0.4 %)"
    plain = scoring.speedup_phrase(2.0, {"naive": 3.0}, "naive")
    assert plain == "1.5x faster than the naive kernel"
