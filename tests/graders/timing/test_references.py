"""When a kept reference timing may stand for one now, and when a median is flagged (no GPU)."""

from __future__ import annotations

from graders.timing.references import remeasure_reason, speed_flag

KEPT = {"gpu": "NVIDIA H100", "driver": "580.1", "sm_clock_mhz": 1980, "temperature_c": 40}


def test_like_conditions_reuse_the_kept_timing() -> None:
    now = {"gpu": "NVIDIA H100", "driver": "580.1", "sm_clock_mhz": 1965, "temperature_c": 50}
    assert remeasure_reason(KEPT, now) is None


def test_a_markedly_different_clock_or_temperature_times_it_again() -> None:
    # The documented limits: 5 % of the kept clock (99 MHz of 1980), 15 degrees C.
    assert remeasure_reason(KEPT, {**KEPT, "sm_clock_mhz": 1980 + 99}) is None
    slow = {**KEPT, "sm_clock_mhz": 1980 - 100}
    assert "SM clock" in (remeasure_reason(KEPT, slow) or "")
    assert remeasure_reason(KEPT, {**KEPT, "temperature_c": 40 + 15}) is None
    hot = {**KEPT, "temperature_c": 40 + 16}
    assert "56 C" in (remeasure_reason(KEPT, hot) or "")
    other = {**KEPT, "driver": "590.0"}
    assert "590.0" in (remeasure_reason(KEPT, other) or "")


def test_unknown_readings_do_not_force_a_new_timing() -> None:
    assert remeasure_reason(KEPT, {"gpu": "NVIDIA H100"}) is None
    assert remeasure_reason({}, {"sm_clock_mhz": 900, "temperature_c": 90}) is None


def test_a_median_far_below_every_reference_is_flagged_for_staff() -> None:
    refs = {"naive": 10.0, "tiled": 2.0, "cublas": 0.5}
    assert speed_flag(0.4, refs, 2.0) is None  # faster than cuBLAS, but not 2x
    flag = speed_flag(0.1, refs, 2.0)
    assert flag is not None and "5.0x faster" in flag and "cublas" in flag
    assert speed_flag(0.1, {}, 2.0) is None
