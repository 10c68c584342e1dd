"""Reference timings kept between gradings: when one may be reused, and when a median is suspect.

The worker keeps each reference's timing per (GPU model, driver, lab content digest, case,
reference) and drops those older than its configured age before it hands them to the run stage.
Here the run child decides, with the GPU's clock and temperature read right after timing the
submission, whether the conditions then and now are alike; if not, it times the reference again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The SM clock may differ by this fraction, the temperature by this many degrees.
CLOCK_TOLERANCE = 0.05
TEMPERATURE_TOLERANCE_C = 15


def remeasure_reason(cached: Mapping[str, Any], now: Mapping[str, Any]) -> str | None:
    """None when `cached` (a TimingStats dict) may stand for a timing now; else why not."""
    then_clock, now_clock = cached.get("sm_clock_mhz"), now.get("sm_clock_mhz")
    if then_clock and now_clock and abs(now_clock - then_clock) > CLOCK_TOLERANCE * then_clock:
        return f"the SM clock was {then_clock} MHz then and is {now_clock} MHz now"
    then_temp, now_temp = cached.get("temperature_c"), now.get("temperature_c")
    known = then_temp is not None and now_temp is not None
    if known and abs(float(now_temp or 0) - float(then_temp or 0)) > TEMPERATURE_TOLERANCE_C:
        return f"the GPU was at {then_temp} C then and is at {now_temp} C now"
    for key in ("gpu", "driver"):
        if cached.get(key) and now.get(key) and cached[key] != now[key]:
            return f"it was timed on {cached[key]}, not {now[key]}"
    return None


def speed_flag(median_ms: float, reference_ms: Mapping[str, float], factor: float) -> str | None:
    """A sentence for staff when the median beats every reference by more than `factor`."""
    if not reference_ms or median_ms <= 0:
        return None
    name, fastest = min(reference_ms.items(), key=lambda item: item[1])
    if median_ms * factor >= fastest:
        return None
    return (
        f"The timed median, {median_ms:.4g} ms, is {fastest / median_ms:.1f}x faster than the "
        f"fastest reference ({name}, {fastest:.4g} ms); the lab flags more than {factor:g}x. "
        "Check that the kernel does the whole computation."
    )
