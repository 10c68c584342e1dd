"""Points: correctness per case, then performance against the lab's references."""

from __future__ import annotations

import math
from dataclasses import dataclass

from graders.results import CaseResult


def correctness_points(cases: list[CaseResult]) -> float:
    return float(sum(c.max_points for c in cases if c.passed))


def performance_fraction(time_ms: float, *, baseline_ms: float, target_ms: float) -> float:
    """1 at or below the target's time, 0 at or above the baseline's, linear in log(time)."""
    if time_ms <= 0 or not math.isfinite(time_ms):
        return 0.0
    if time_ms <= target_ms:
        return 1.0
    if time_ms >= baseline_ms or baseline_ms <= target_ms:
        return 0.0
    span = math.log(baseline_ms) - math.log(target_ms)
    return (math.log(baseline_ms) - math.log(time_ms)) / span


@dataclass
class PerformanceScore:
    points: float
    sentence: str
    # Held back (no points yet): work outside the GPU's lock overlapped the timing.
    pending: bool = False
    # The median was under the physics floor: no points, and a flag for staff.
    impossible: bool = False


PENDING_SENTENCE = (
    "Performance points pending: other work on the GPU overlapped the timing, so the kernel "
    "will be timed again when the GPU is quiet."
)


def performance_score(
    *,
    max_points: float,
    all_passed: bool,
    time_ms: float | None,
    reference_ms: dict[str, float],
    baseline: str,
    target: str,
    contended: bool = False,
    floor_ms: float | None = None,
) -> PerformanceScore:
    """Performance points and a sentence saying how they were reached."""
    if max_points <= 0:
        return PerformanceScore(0.0, "")
    if not all_passed:
        return PerformanceScore(
            0.0, "No performance points: they are given only when every case passes."
        )
    if time_ms is None:
        return PerformanceScore(0.0, "No performance points: the kernel could not be timed.")
    if contended:
        return PerformanceScore(0.0, PENDING_SENTENCE, pending=True)
    if floor_ms is not None and time_ms < floor_ms:
        return PerformanceScore(
            0.0,
            f"No performance points: a median of {time_ms:.4g} ms is less than this GPU needs "
            f"to move the lab's data or do its arithmetic ({floor_ms:.4g} ms at the least), so "
            "the timing cannot be right; the course staff will look at it.",
            impossible=True,
        )
    base, tgt = reference_ms.get(baseline), reference_ms.get(target)
    if base is None or tgt is None:
        missing = baseline if base is None else target
        return PerformanceScore(
            0.0, f"No performance points: the reference '{missing}' could not be timed."
        )
    points = round(max_points * performance_fraction(time_ms, baseline_ms=base, target_ms=tgt), 2)
    return PerformanceScore(
        points,
        f"Median {time_ms:.4g} ms against {baseline} {base:.4g} ms and {target} {tgt:.4g} ms: "
        f"{points:g} of {max_points:g} performance points.",
    )


def speedup_phrase(
    time_ms: float,
    reference_ms: dict[str, float],
    baseline: str,
    spread: float | None = None,
) -> str:
    """ "1.5x faster than the naive kernel", with the ratio's relative spread when known."""
    base = reference_ms.get(baseline)
    if not base or time_ms <= 0:
        return ""
    ratio = base / time_ms
    within = f" (± {100 * spread:.1f} %)" if spread is not None and math.isfinite(spread) else ""
    if ratio >= 1:
        return f"{ratio:.2g}x faster than the {baseline} kernel{within}"
    return f"{1 / ratio:.2g}x slower than the {baseline} kernel{within}"


def summary_sentence(cases: list[CaseResult], perf: PerformanceScore, speed: str = "") -> str:
    run = [c for c in cases if c.verdict != "not_run"]
    passed = [c for c in cases if c.passed]
    if cases and len(passed) == len(cases):
        head = f"All {len(cases)} cases passed"
        return head + (f"; {speed}." if speed else ".")
    failed = [c for c in run if not c.passed]
    text = f"{len(passed)} of {len(cases)} cases passed"
    if failed:
        first = failed[0]
        # The summary is shown at once; a hidden case shows only pass or fail until the due date.
        why = "a hidden case" if first.hidden else first.verdict.replace("_", " ")
        text += f"; the first failure is {first.name} ({why})"
    not_run = len(cases) - len(run)
    if not_run:
        text += f"; {not_run} not run"
    return text + "."
