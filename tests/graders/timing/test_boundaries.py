"""Timing's thresholds on both sides, exactly at each limit and one step past it (no GPU).

Written against the survivors of scripts/mutation.py: each test here fails when a comparison
is loosened or tightened, a constant moves, or an argument is dropped.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from graders.results import TimingStats
from graders.timing import repetitions as timing
from graders.timing.peaks import GpuPeak, floor_ms, peak_for
from graders.timing.references import remeasure_reason, speed_flag
from graders.timing.repetitions import CHECKED, FULL, SUBMISSION, TIMED, Arm

KEPT = {"gpu": "NVIDIA H100", "driver": "580.1", "sm_clock_mhz": 2000, "temperature_c": 40}


# --- kept reference timings: 5 % of the clock, 15 degrees C (documented in references.py) ---


def test_a_clock_exactly_five_percent_off_keeps_the_figure_and_one_mhz_more_does_not() -> None:
    assert remeasure_reason(KEPT, {**KEPT, "sm_clock_mhz": 2100}) is None
    assert remeasure_reason(KEPT, {**KEPT, "sm_clock_mhz": 1900}) is None
    assert remeasure_reason(KEPT, {**KEPT, "sm_clock_mhz": 2101}) == (
        "the SM clock was 2000 MHz then and is 2101 MHz now"
    )
    assert remeasure_reason(KEPT, {**KEPT, "sm_clock_mhz": 1899}) == (
        "the SM clock was 2000 MHz then and is 1899 MHz now"
    )


def test_a_temperature_exactly_fifteen_degrees_off_keeps_the_figure_and_one_more_does_not() -> None:
    assert remeasure_reason(KEPT, {**KEPT, "temperature_c": 55}) is None
    assert remeasure_reason(KEPT, {**KEPT, "temperature_c": 25}) is None
    assert remeasure_reason(KEPT, {**KEPT, "temperature_c": 56}) == (
        "the GPU was at 40 C then and is at 56 C now"
    )
    assert remeasure_reason(KEPT, {**KEPT, "temperature_c": 24}) == (
        "the GPU was at 40 C then and is at 24 C now"
    )


def test_a_reading_of_zero_degrees_is_a_reading() -> None:
    assert remeasure_reason({"temperature_c": 0}, {"temperature_c": 16}) is not None
    assert remeasure_reason({"temperature_c": 16}, {"temperature_c": 0}) is not None
    assert remeasure_reason({"temperature_c": 0}, {"temperature_c": 15}) is None
    assert remeasure_reason({"temperature_c": 15}, {"temperature_c": 0}) is None


def test_another_gpu_or_driver_times_it_again() -> None:
    assert remeasure_reason(KEPT, {**KEPT, "gpu": "NVIDIA H200"}) == (
        "it was timed on NVIDIA H100, not NVIDIA H200"
    )
    assert remeasure_reason(KEPT, {**KEPT, "driver": "590.0"}) == "it was timed on 580.1, not 590.0"


# --- the speed flag: more than `factor` times faster than the fastest reference ---


def test_the_flag_names_the_fastest_reference_by_time_not_by_name() -> None:
    refs = {"alpha": 4.0, "beta": 1.0, "gamma": 2.0}
    flag = speed_flag(0.25, refs, 2.0)
    assert flag == (
        "The timed median, 0.25 ms, is 4.0x faster than the fastest reference (beta, 1 ms); "
        "the lab flags more than 2x. Check that the kernel does the whole computation."
    )


def test_exactly_factor_times_faster_is_not_flagged_and_a_little_more_is() -> None:
    refs = {"tiled": 1.0}
    assert speed_flag(0.5, refs, 2.0) is None
    assert speed_flag(0.4999, refs, 2.0) is not None


def test_a_median_of_zero_is_no_flag() -> None:
    assert speed_flag(0.0, {"tiled": 1.0}, 2.0) is None
    assert speed_flag(-1.0, {"tiled": 1.0}, 2.0) is None


# --- peaks and the physics floor ---


def test_the_peak_for_a_data_type() -> None:
    h100 = peak_for("NVIDIA H100 80GB HBM3")
    assert h100 is not None
    assert h100.tflops("float64") == 34.0
    assert h100.tflops("float32") == 67.0
    assert h100.tflops("int32") == 67.0
    assert h100.ceiling_tflops("float16") == 990.0
    assert h100.ceiling_tflops("bfloat16") == 990.0


def test_each_ceiling_takes_the_fastest_unit_including_the_cuda_cores() -> None:
    cores_fastest = GpuPeak("cores", 100.0, 50.0, 1000.0, (10.0, 30.0, 5.0, 20.0))
    assert cores_fastest.ceiling_tflops("float16") == 100.0
    assert cores_fastest.ceiling_tflops("bfloat16") == 100.0
    assert cores_fastest.ceiling_tflops("float32") == 100.0
    assert cores_fastest.ceiling_tflops("float64") == 50.0
    assert cores_fastest.ceiling_tflops("int8") == 100.0
    # A float32 lab split over FP16 tensor products takes three of them per product.
    fp16_fastest = GpuPeak("fp16", 1.0, 1.0, 1000.0, (2.0, 30.0, 0.0, 0.0))
    assert fp16_fastest.ceiling_tflops("float32") == 10.0


def test_the_floor_in_exact_units() -> None:
    card = GpuPeak("exact", 1.0, 1.0, 1000.0, (0.0, 0.0, 0.0, 0.0))
    # 2 TB at 1000 GB/s is 2 s; half of it is the floor.
    assert floor_ms(card, flops=0, nbytes=2e12, launches=1, dtype="float32") == 1000.0
    # 4e12 flop at 1 TFLOP/s is 4 s.
    assert floor_ms(card, flops=4e12, nbytes=0, launches=1, dtype="float32") == 2000.0


def test_gpu_names_match_whatever_their_case() -> None:
    peak = peak_for("nvidia h100 80gb hbm3")
    assert peak is not None and peak.model == "H100 SXM5"
    assert peak_for("") is None and peak_for(None) is None
    assert peak_for("Some Other GPU") is None


# --- statistics ---


def test_no_samples_says_so() -> None:
    with pytest.raises(ValueError, match=r"^no timing samples$"):
        timing.stats_from_samples([])


def test_one_sample_has_no_spread_and_an_unknown_error() -> None:
    one = timing.stats_from_samples([2.0])
    assert one.stdev_ms == 0.0 and one.rse == 1.0 and one.reps == 1


def test_two_samples_have_a_spread() -> None:
    two = timing.stats_from_samples([1.0, 3.0])
    assert two.stdev_ms == pytest.approx(math.sqrt(2))
    assert two.rse == pytest.approx(math.sqrt(2) / math.sqrt(2) / 2.0)
    assert timing.relative_standard_error([1.0, 3.0]) == pytest.approx(0.5)


def test_a_mean_of_zero_has_no_relative_error() -> None:
    assert timing.relative_standard_error([0.0, 0.0]) == math.inf
    assert timing.relative_standard_error([-1.0, 1.0]) == math.inf


def test_an_unknown_spread_counts_as_one_hundred_percent() -> None:
    unknown = TimingStats(1.0, 1.0, 1.0, 0.0, 1, math.inf)
    exact = TimingStats(1.0, 1.0, 1.0, 0.0, 20, 0.0)
    assert timing.ratio_spread(unknown, exact) == 1.0
    assert timing.ratio_spread(exact, exact) == 0.0


# --- the plan's stopping rules, at their limits ---


def test_warm_up_ends_once_the_drawn_count_is_done() -> None:
    plan = timing.TimingPlan()
    assert plan.warmed_up(3, 3, busy_ms=1000.0, wall_s=0.0)
    assert not plan.warmed_up(2, 3, busy_ms=1000.0, wall_s=0.0)


def test_after_min_reps_the_budget_ends_it_exactly_at_the_budget() -> None:
    plan = timing.TimingPlan(budget_seconds=3.0, target_rse=0.0, min_reps=4, max_reps=100)
    noisy = [1.0, 2.0] * 3
    assert not plan.done(noisy, 2.999)
    assert plan.done(noisy, 3.0)


def test_a_kept_figure_of_zero_never_stands_and_a_short_one_does() -> None:
    plan = timing.TimingPlan()
    zero = TimingStats(0.0, 0.0, 0.0, 0.0, 20, 0.0)
    assert not plan.agrees(zero, [0.0, 0.0, 0.0, 0.0])
    short = TimingStats(0.5, 0.5, 0.5, 0.0, 20, 0.0)
    assert plan.agrees(short, [0.5, 0.5, 0.5, 0.5])


def test_the_kept_figures_own_spread_widens_what_agrees() -> None:
    plan = timing.TimingPlan()
    loose = TimingStats(2.0, 2.0, 2.0, 0.0, 20, 0.05)  # 5 %: three times is 15 %
    assert plan.agrees(loose, [2.2] * 4)
    assert not plan.agrees(loose, [2.32] * 4)


def test_three_times_the_spread_and_not_four() -> None:
    plan = timing.TimingPlan(agree_within=0.0)
    kept = TimingStats(2.0, 2.0, 2.0, 0.0, 20, 0.01)  # three times: 3 %
    assert plan.agrees(kept, [2.06] * 4)
    assert not plan.agrees(kept, [2.07] * 4)  # 3.5 %: inside four times, outside three


def test_the_section_holds_each_timed_arm_a_budget_and_each_checked_one_a_tenth() -> None:
    plan = timing.TimingPlan(budget_seconds=2.0, warmup_wall_seconds=1.0)
    assert plan.section_seconds(2, 0) == 5.0
    assert plan.section_seconds(2, 5) == pytest.approx(6.0)
    assert plan.section_seconds(1, 10) == pytest.approx(5.0)


def test_a_wrong_repetition_keeps_its_number_and_sentence() -> None:
    wrong = timing.WrongRepetition(7, "element 3 is 2.0, expected 1.0")
    assert wrong.rep == 7 and wrong.message == "element 3 is 2.0, expected 1.0"
    assert str(wrong) == "element 3 is 2.0, expected 1.0"


# --- the interleaved schedule ---


class Clock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def arm(name: str, role: str, clock: Clock, *, ms: float = 1.0, wall: float = 0.25) -> Arm:
    def measure(rep: int, check: str) -> float:
        clock.now += wall
        return ms

    return Arm(name, role, measure)


def test_repetitions_are_numbered_from_zero_and_the_next_number_is_returned() -> None:
    clock, seen = Clock(), []

    def measure(rep: int, check: str) -> float:
        seen.append(rep)
        clock.now += 0.001
        return 1.0

    plan = timing.TimingPlan(target_rse=0.0, min_reps=2, max_reps=5, extra_reps=0)
    after = timing.interleave(
        [Arm("s", SUBMISSION, measure)], plan=plan, rng=random.Random(0), clock=clock
    )
    assert seen[0] == 0 and seen == list(range(len(seen)))
    assert after == len(seen)
    later = timing.interleave(
        [Arm("t", SUBMISSION, measure)], plan=plan, rng=random.Random(0), clock=clock, first_rep=50
    )
    assert seen[-1] == later - 1 and later > 50


def test_warm_ups_take_the_drawn_count_when_the_gpu_is_busy_at_once() -> None:
    counts = set()
    for seed in range(12):
        clock = Clock()
        s = arm("s", SUBMISSION, clock, ms=100.0, wall=0.001)
        plan = timing.TimingPlan(target_rse=0.0, min_reps=2, max_reps=2, extra_reps=0)
        plan.warmup_reps, plan.extra_warmups = 3, 3
        timing.interleave([s], plan=plan, rng=random.Random(seed), clock=clock)
        # 0.001 s of wall per repetition: the timed ones are the last two.
        counts.add(round(clock.now / 0.001) - 2)
    assert counts <= {3, 4, 5, 6} and len(counts) > 1


def test_warm_ups_stop_exactly_when_the_gpu_was_busy_fifty_milliseconds() -> None:
    clock, log = Clock(), []

    def measure(rep: int, check: str) -> float:
        log.append(rep)
        clock.now += 0.001
        return 12.25  # four make 49 ms, five 61.25

    plan = timing.TimingPlan(target_rse=0.0, min_reps=2, max_reps=2, extra_reps=0)
    plan.warmup_reps, plan.extra_warmups = 1, 0
    timing.interleave([Arm("s", SUBMISSION, measure)], plan=plan, rng=random.Random(0), clock=clock)
    assert len(log) == 5 + 2


def test_warm_ups_count_wall_time_from_the_sections_start() -> None:
    # A clock that does not start at zero: the warm-up's wall time is a difference.
    clock = Clock(now=1000.0)
    s = arm("s", SUBMISSION, clock, ms=0.001, wall=0.001)
    plan = timing.TimingPlan(target_rse=0.0, min_reps=2, max_reps=2, extra_reps=0)
    plan.warmup_reps, plan.extra_warmups = 3, 0
    timing.interleave([s], plan=plan, rng=random.Random(0), clock=clock)
    # Not warm by busy time (0.003 ms) nor wall time: 53 warm-ups (3 drawn + 50), then 2.
    assert round((clock.now - 1000.0) / 0.001) == 53 + 2


def test_after_warm_up_is_handed_the_arms() -> None:
    clock = Clock()
    arms = [arm("s", SUBMISSION, clock), arm("naive", TIMED, clock)]
    handed: list[object] = []
    plan = timing.TimingPlan(target_rse=0.0, min_reps=2, max_reps=2, extra_reps=0)
    timing.interleave(
        arms, plan=plan, rng=random.Random(0), clock=clock, after_warm_up=handed.append
    )
    assert handed == [arms]


def test_one_repetition_with_min_reps_one_is_the_one_checked_in_full() -> None:
    for seed in range(10):
        checks: list[str] = []

        def measure(rep: int, check: str, checks: list[str] = checks) -> float:
            checks.append(check)
            return 1.0

        plan = timing.TimingPlan(
            target_rse=0.0, min_reps=1, max_reps=1, extra_reps=0, full_check_fraction=0.0
        )
        s = Arm("s", SUBMISSION, measure)
        timing.interleave([s], plan=plan, rng=random.Random(seed), warm_up=False)
        assert checks == [FULL] and s.full_checks == 1


def test_timed_arms_draw_extra_repetitions_and_checked_arms_none() -> None:
    counts = set()
    for seed in range(12):
        clock = Clock()
        s = arm("s", SUBMISSION, clock, wall=0.001)
        ref = arm("tiled", CHECKED, clock, ms=2.0, wall=0.001)
        plan = timing.TimingPlan(target_rse=0.0, min_reps=2, max_reps=10, extra_reps=4)
        timing.interleave([s, ref], plan=plan, rng=random.Random(seed), clock=clock)
        counts.add(len(s.samples))
        assert len(ref.samples) == plan.check_reps  # 4 x 2 ms reach the 5 ms: done, no extra
    assert counts <= set(range(10, 15)) and len(counts) > 1


def test_each_arm_adds_up_its_own_wall_time() -> None:
    clock = Clock()
    s = arm("s", SUBMISSION, clock, wall=0.25)
    naive = arm("naive", TIMED, clock, wall=0.5)
    plan = timing.TimingPlan(target_rse=0.0, min_reps=2, max_reps=4, extra_reps=0)
    timing.interleave([s, naive], plan=plan, rng=random.Random(0), clock=clock, warm_up=False)
    assert s.seconds == 4 * 0.25 and naive.seconds == 4 * 0.5


def test_the_section_ends_exactly_at_its_time_with_checked_arms_counted_a_tenth() -> None:
    # Two timed arms spend their budget (1 s each) in four rounds, at 3.0 s; the checked arm,
    # a kernel too short to be done in 12 repetitions, would go on: the section's time (two
    # budgets, a tenth of one for the checked arm, and the warm-up's 0.9 s) is exactly 3.0 s.
    clock = Clock()
    s = arm("s", SUBMISSION, clock)
    naive = arm("naive", TIMED, clock)
    tiled = arm("tiled", CHECKED, clock, ms=0.001)
    plan = timing.TimingPlan(
        budget_seconds=1.0, target_rse=0.0, min_reps=100, max_reps=100, extra_reps=0
    )
    plan.warmup_wall_seconds = 0.9
    assert plan.section_seconds(2, 1) == 3.0
    after = timing.interleave(
        [s, naive, tiled], plan=plan, rng=random.Random(0), clock=clock, warm_up=False
    )
    assert clock.now == 3.0
    assert [len(a.samples) for a in (s, naive, tiled)] == [4, 4, 4]
    assert after == 12


def test_a_gpu_already_at_speed_ends_the_warm_up_at_the_drawn_rounds() -> None:
    # The GPU was warmed before the section (warm_rounds): a fast kernel's drawn warm-ups are
    # enough while at_speed says so, and it is asked only once they are done.
    asked: list[int] = []

    def run(at: bool | None) -> int:
        clock, log = Clock(), []

        def measure(rep: int, check: str) -> float:
            log.append(rep)
            clock.now += 0.001
            return 0.01  # far from 50 ms of busy time

        def at_speed() -> bool:
            asked.append(len(log))
            return bool(at)

        plan = timing.TimingPlan(target_rse=0.0, min_reps=2, max_reps=2, extra_reps=0)
        plan.warmup_reps, plan.extra_warmups = 3, 0
        timing.interleave(
            [Arm("s", SUBMISSION, measure)],
            plan=plan,
            rng=random.Random(0),
            clock=clock,
            at_speed=None if at is None else at_speed,
        )
        return len(log) - 2  # the warm-ups

    assert run(True) == 3 and asked == [3]
    asked.clear()
    # Not at speed (the clock fell while the section waited): the busy-time rule, as without.
    assert run(False) == 53 and asked[0] == 3 and len(asked) == 51
    assert run(None) == 53


def test_warm_rounds_run_every_arm_until_the_gpu_was_busy_or_the_wall_time_is_up() -> None:
    plan = timing.TimingPlan()  # 50 ms busy, 1 s wall

    def rounds(ms: float, wall: float) -> tuple[list[tuple[str, int, str]], int]:
        clock, log = Clock(now=1000.0), []  # the wall time is a difference

        def measure(name: str) -> Callable[[int, str], float]:
            def m(rep: int, check: str) -> float:
                log.append((name, rep, check))
                clock.now += wall
                return ms

            return m

        arms = [Arm("s", SUBMISSION, measure("s")), Arm("ref", TIMED, measure("ref"))]
        after = timing.warm_rounds(arms, plan=plan, first_rep=7, clock=clock)
        return log, after

    # 12.5 ms a launch: two rounds make exactly 50 ms.
    log, after = rounds(12.5, 0.001)
    assert [r for _, r, _ in log] == [7, 8, 9, 10] and after == 11
    assert {(n, c) for n, _, c in log} == {("s", "cheap"), ("ref", "none")}
    # Just under: a third round.
    log, _ = rounds(12.49, 0.001)
    assert len(log) == 6
    # A slow check: the wall time ends it (0.25 s a launch: two rounds make 1 s).
    log, _ = rounds(0.001, 0.25)
    assert len(log) == 4
    # One round always, however busy.
    log, _ = rounds(1000.0, 0.0)
    assert len(log) == 2


def test_warm_rounds_end_after_a_round_once_the_clock_is_up() -> None:
    plan = timing.TimingPlan()
    clock, log, asked = Clock(), [], []

    def measure(rep: int, check: str) -> float:
        log.append(rep)
        clock.now += 0.001
        return 0.5  # 100 rounds before 50 ms of busy time

    def at_speed() -> bool:
        asked.append(len(log))
        return len(log) >= 6  # the clock is up after the third round

    arms = [Arm("s", SUBMISSION, measure), Arm("ref", TIMED, measure)]
    after = timing.warm_rounds(arms, plan=plan, at_speed=at_speed, clock=clock)
    assert after == 6 and asked == [2, 4, 6]  # asked after each whole round, never mid-round
    # Up from the start: still one round.
    log.clear()
    assert timing.warm_rounds(arms, plan=plan, at_speed=lambda: True, clock=clock) == 2
