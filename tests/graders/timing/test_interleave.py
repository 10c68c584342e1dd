"""The timed section's schedule: arms interleaved at random, checks drawn, budgets kept."""

from __future__ import annotations

import random

import pytest

from graders.results import TimingStats
from graders.timing import repetitions as timing
from graders.timing.repetitions import CHEAP, CHECKED, FULL, NO_CHECK, SUBMISSION, TIMED, Arm


class Clock:
    """A clock that moves only when a measured repetition says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def recorder(
    name: str, clock: Clock, log: list[tuple[str, int, str]], ms: float = 1.0, wall: float = 0.001
):
    def measure(rep: int, check: str) -> float:
        log.append((name, rep, check))
        clock.now += wall
        return ms

    return measure


def plan(**kw: float) -> timing.TimingPlan:
    base = dict(budget_seconds=1.0, target_rse=0.0, min_reps=10, max_reps=20)
    base.update(kw)
    return timing.TimingPlan(**base)  # type: ignore[arg-type]


def test_every_arm_gets_its_repetitions_in_rounds_with_inputs_of_their_own() -> None:
    clock, log = Clock(), []
    arms = [
        Arm("submission", SUBMISSION, recorder("submission", clock, log)),
        Arm("naive", TIMED, recorder("naive", clock, log, ms=2.0)),
        Arm("tiled", CHECKED, recorder("tiled", clock, log)),
    ]
    p = plan(extra_reps=0)
    timing.interleave(arms, plan=p, rng=random.Random(1), clock=clock)
    by = {a.name: a for a in arms}
    assert len(by["submission"].samples) == p.max_reps  # target_rse 0: only max_reps stops it
    assert len(by["naive"].samples) == p.max_reps
    # 1 ms a repetition: five reach the 5 ms of kernel time a check wants.
    assert len(by["tiled"].samples) == 5
    reps = [rep for _, rep, _ in log]
    assert reps == sorted(reps) and len(set(reps)) == len(reps)  # every repetition new inputs
    # References are never checked; the submission is checked every time, warm-ups included.
    assert {c for n, _, c in log if n != "submission"} == {NO_CHECK}
    assert {c for n, _, c in log if n == "submission"} <= {CHEAP, FULL}


def test_rounds_interleave_the_arms_in_an_order_drawn_each_round() -> None:
    clock, log = Clock(), []
    arms = [Arm(n, SUBMISSION if n == "s" else TIMED, recorder(n, clock, log)) for n in "sab"]
    timing.interleave(arms, plan=plan(extra_reps=0), rng=random.Random(7), clock=clock)
    timed = [n for n, _, c in log]
    rounds = [tuple(timed[i : i + 3]) for i in range(len(timed) - 30, len(timed), 3)]
    assert all(sorted(r) == ["a", "b", "s"] for r in rounds)
    assert len(set(rounds)) > 1, "the order within a round must vary"


def test_a_random_share_of_the_submissions_repetitions_is_checked_in_full() -> None:
    clock, log = Clock(), []
    arm = Arm("submission", SUBMISSION, recorder("submission", clock, log))
    p = plan(max_reps=400, min_reps=10, extra_reps=0, full_check_fraction=0.25)
    timing.interleave([arm], plan=p, rng=random.Random(3), clock=clock)
    timed = [c for _, _, c in log][-400:]
    share = timed.count(FULL) / len(timed)
    assert 0.18 < share < 0.32
    assert arm.full_checks == timed.count(FULL)


def test_with_no_random_share_one_drawn_repetition_is_still_checked_in_full() -> None:
    for seed in range(20):
        clock, log = Clock(), []
        arm = Arm("submission", SUBMISSION, recorder("submission", clock, log))
        p = plan(extra_reps=0, full_check_fraction=0.0)
        timing.interleave([arm], plan=p, rng=random.Random(seed), clock=clock)
        assert [c for _, _, c in log].count(FULL) == 1


def test_warm_ups_are_checked_cheaply_and_not_sampled() -> None:
    clock, log = Clock(), []
    arm = Arm("submission", SUBMISSION, recorder("submission", clock, log, ms=10.0))
    p = plan(extra_reps=0, extra_warmups=0, warmup_reps=3)
    timing.interleave([arm], plan=p, rng=random.Random(0), clock=clock)
    # 10 ms a repetition: 5 warm-ups reach the 50 ms of GPU time that settles the clocks.
    assert len(log) == 5 + p.max_reps
    assert all(c == CHEAP for _, _, c in log[:5])
    assert len(arm.samples) == p.max_reps


def test_the_section_stops_at_its_time_once_every_arm_has_a_sample() -> None:
    clock, log = Clock(), []
    slow = recorder("submission", clock, log, wall=0.4)
    arms = [
        Arm("submission", SUBMISSION, slow),
        Arm("naive", TIMED, recorder("naive", clock, log, wall=0.4)),
    ]
    p = plan(budget_seconds=1.0, min_reps=100, max_reps=1000, extra_reps=0)
    timing.interleave(arms, plan=p, rng=random.Random(0), clock=clock)
    limit = p.section_seconds(2, 0)
    assert clock.now <= p.warmup_wall_seconds + limit + 2 * 0.4 + 1e-9
    assert all(len(a.samples) >= 2 for a in arms)


def test_a_wrong_repetition_ends_the_section() -> None:
    def wrong(rep: int, check: str) -> float:
        if rep == 7:
            raise timing.WrongRepetition(rep, "element 3 is wrong")
        return 1.0

    with pytest.raises(timing.WrongRepetition):
        timing.interleave([Arm("submission", SUBMISSION, wrong)], plan=plan(), rng=random.Random(0))


def _kept(median: float, rse: float = 0.001) -> TimingStats:
    return TimingStats(median, median, median, 0.0, 20, rse)


def test_a_check_takes_its_least_repetitions_or_enough_kernel_time() -> None:
    p = plan()
    arm = Arm("tiled", CHECKED, lambda rep, check: 1.0)
    arm.samples = [2.0] * 3
    assert not arm.done(p)  # fewer than check_reps
    arm.samples = [2.0] * 4
    assert arm.done(p)  # 8 ms of kernel time
    arm.samples = [0.1] * 11
    assert not arm.done(p)  # a short kernel: more repetitions...
    arm.samples = [0.1] * 12
    assert arm.done(p)  # ...up to three times check_reps


def test_a_kept_figure_stands_within_two_percent_and_not_beyond() -> None:
    p = plan()
    kept = _kept(2.0)
    assert p.agrees(kept, [2.0, 2.0, 2.0, 2.0])
    assert p.agrees(kept, [2.04] * 4)  # exactly 2 %: stands
    assert not p.agrees(kept, [2.0401] * 4)
    assert not p.agrees(kept, [1.95] * 4)  # 2.5 % faster now
    assert not p.agrees(kept, [])


def test_a_noisy_check_widens_what_agrees_to_its_spread() -> None:
    p = plan()
    noisy = [1.8, 2.2, 1.9, 2.3]  # rse about 5 %
    assert p.agrees(_kept(2.2), noisy)  # 2.05 against 2.2: inside three times the spread
    assert not p.agrees(_kept(3.0), noisy)


def test_fewer_than_min_reps_stops_at_the_budget_not_past_it() -> None:
    p = plan(budget_seconds=3.0, min_reps=10)
    assert not p.done([5.0, 5.1], 2.999)
    assert p.done([5.0, 5.1], 3.0)


def test_the_ratio_spread_combines_both_medians() -> None:
    a, b = _kept(1.0, rse=0.03), _kept(2.0, rse=0.04)
    assert timing.ratio_spread(a, b) == pytest.approx(0.05)
