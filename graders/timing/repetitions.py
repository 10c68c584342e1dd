"""Kernel timing you can trust: CUDA events, L2 flushed, repeated until the mean is tight.

Every repetition, warm-ups included, runs on inputs made for it alone and its output is checked
before the next one (between the events, so untimed): a kernel that replays an earlier answer
or skips launches fails. How many warm-ups and repetitions there are is not predictable either:
both draw a few extra from the grading's random generator.

The statistics are pure Python (tested without a GPU); `time_repetitions` drives the GPU
through callables the run stage supplies, so it knows nothing about labs.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from graders.results import TimingStats


def stats_from_samples(samples_ms: list[float]) -> TimingStats:
    if not samples_ms:
        raise ValueError("no timing samples")
    mean = statistics.fmean(samples_ms)
    stdev = statistics.stdev(samples_ms) if len(samples_ms) > 1 else 0.0
    return TimingStats(
        median_ms=statistics.median(samples_ms),
        min_ms=min(samples_ms),
        mean_ms=mean,
        stdev_ms=stdev,
        reps=len(samples_ms),
        rse=relative_standard_error(samples_ms),
    )


def relative_standard_error(samples: list[float]) -> float:
    """Standard error of the mean over the mean; inf with fewer than two samples."""
    if len(samples) < 2:
        return math.inf
    mean = statistics.fmean(samples)
    if mean <= 0:
        return math.inf
    return statistics.stdev(samples) / math.sqrt(len(samples)) / mean


@dataclass
class TimingPlan:
    budget_seconds: float = 3.0
    target_rse: float = 0.01
    min_reps: int = 10
    max_reps: int = 500
    warmup_reps: int = 2
    # Up to this many more warm-ups and repetitions, drawn at random per grading.
    extra_warmups: int = 3
    extra_reps: int = 4
    # Warm-ups go on (up to 50 of them) until the GPU has been busy this long: its clocks
    # ramp up from idle, and a median taken before they settle is slow and unsteady...
    warmup_seconds: float = 0.05
    # ...or until this much wall time has passed: where checking a repetition takes long on
    # the host (a lab's Python oracle computes each answer there), the GPU idles between
    # launches anyway, and 50 warm-ups would hold the GPU's lock for many seconds.
    warmup_wall_seconds: float = 1.0

    def warmed_up(self, done: int, drawn: int, busy_ms: float, wall_s: float) -> bool:
        """Whether warming up is over after `done` warm-ups (`drawn` of them at least)."""
        if done < drawn:
            return False
        return (
            busy_ms >= self.warmup_seconds * 1000
            or wall_s >= self.warmup_wall_seconds
            or done >= drawn + 50
        )

    def done(self, samples: list[float], elapsed_s: float) -> bool:
        """Stop at max_reps, or once min_reps are in and the mean is tight or time is up."""
        n = len(samples)
        if n >= self.max_reps:
            return True
        if n < 2:
            # One sample has no spread: its rse would be inf, which is not JSON for the service.
            return False
        if n < self.min_reps:
            # The budget still stops a kernel so slow that min_reps would take minutes.
            return n >= 2 and elapsed_s > 4 * self.budget_seconds
        return (
            elapsed_s >= self.budget_seconds or relative_standard_error(samples) < self.target_rse
        )


_CUDA_ERROR_NOT_READY = 600  # cudaErrorNotReady: the event's work is still running


class KernelHung(RuntimeError):
    """A timed launch did not finish within its limit."""


def wait_event(event: object, deadline: float) -> None:
    """Poll a CUDA event until it completes; raise KernelHung past the deadline.

    Polling (instead of a blocking synchronize) lets the grader give up on a kernel that
    never ends and report it, rather than hanging with it.
    """
    from cupy.cuda import runtime

    while True:
        # Not `event.done`: that is False for a failed kernel too (the query's status is not
        # checked), so a trap or an illegal address would wait out the limit and read as a hang.
        status = runtime.eventQuery(event.ptr)  # type: ignore[attr-defined]
        if status == 0:
            return
        if status != _CUDA_ERROR_NOT_READY:
            raise runtime.CUDARuntimeError(status)
        if time.monotonic() > deadline:
            raise KernelHung("the kernel did not finish in time")
        time.sleep(0.0002)


class L2Flusher:
    """Overwrites a buffer twice the L2's size, evicting whatever the last rep left there."""

    def __init__(self) -> None:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        self.nbytes = max(int(props.get("l2CacheSize", 0)) * 2, 8 << 20)
        self.buffer = cupy.empty(self.nbytes, dtype=cupy.uint8)
        self._value = 0

    def flush(self) -> None:
        import cupy

        self._value = (self._value + 1) % 251
        cupy.cuda.runtime.memsetAsync(
            self.buffer.data.ptr, self._value, self.nbytes, cupy.cuda.get_current_stream().ptr
        )


class WrongRepetition(Exception):
    """A timed repetition's output was wrong; `message` says how."""

    def __init__(self, rep: int, message: str) -> None:
        super().__init__(message)
        self.rep = rep
        self.message = message


def time_repetitions(
    run: Callable[[], None],
    prepare: Callable[[int], None],
    check: Callable[[int], str | None],
    *,
    plan: TimingPlan,
    flusher: L2Flusher,
    launch_timeout_s: float,
    rng: random.Random,
) -> TimingStats:
    """Time `run` (all of one case's launches) between CUDA events, after warm-up.

    Before repetition `i`, `prepare(i)` writes its fresh inputs and refills the outputs with
    the sentinel; after it, `check(i)` returns None or a sentence, and a sentence ends the
    timing with WrongRepetition. Both happen outside the events.
    """
    import cupy

    stream = cupy.cuda.get_current_stream()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    rep = 0

    def once(timed: bool) -> float:
        nonlocal rep
        prepare(rep)
        flusher.flush()
        start.record(stream)
        run()
        end.record(stream)
        wait_event(end, time.monotonic() + launch_timeout_s)
        elapsed = cupy.cuda.get_elapsed_time(start, end) if timed else 0.0
        problem = check(rep)
        if problem:
            raise WrongRepetition(rep, problem)
        rep += 1
        return elapsed

    warmups = plan.warmup_reps + rng.randint(0, plan.extra_warmups)
    busy = 0.0
    warming = time.monotonic()
    done = 0
    while not plan.warmed_up(done, warmups, busy, time.monotonic() - warming):
        busy += once(timed=True)
        done += 1
    samples: list[float] = []
    extra = rng.randint(0, plan.extra_reps)
    stop_at: int | None = None
    began = time.monotonic()
    while stop_at is None or len(samples) < stop_at:
        samples.append(once(timed=True))
        if stop_at is None and plan.done(samples, time.monotonic() - began):
            stop_at = len(samples) + extra
    return stats_from_samples(samples)
