"""Kernel timing you can trust: CUDA events, L2 flushed, repeated until the median is tight.

A timed section times several arms in one run, their repetitions interleaved in an order drawn at
random each round: the submission, each reference timed anew, and a few repetitions of each
reference whose kept figure is being checked (A/B/A/B). Drift of the GPU's clocks, or another
process's load, then falls on every arm alike, and a ratio comes from one run.

Every repetition, warm-ups included, runs on inputs made for it alone. The submission's output is
checked after each one (between the events, so untimed): cheaply every time (against a trusted
reference's output on the same inputs, in one pass), and in full in float64 on a random subset of
repetitions decided after the launch, so a kernel cannot tell which launches are checked in full.
A kernel that replays an earlier answer or skips launches fails. How many warm-ups and
repetitions there are is not predictable either: both draw a few extra from the grading's random
generator.

The statistics and the schedule are pure Python (tested without a GPU); each arm's `measure`
drives the GPU through callables the run stage supplies (graders.run.timed).

"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from graders.results import TimingStats


def stats_from_samples(samples_ms: list[float]) -> TimingStats:
    if not samples_ms:
        raise ValueError("no timing samples")
    mean = statistics.fmean(samples_ms)
    stdev = statistics.stdev(samples_ms) if len(samples_ms) > 1 else 0.0
    rse = relative_standard_error(samples_ms)
    return TimingStats(
        median_ms=statistics.median(samples_ms),
        min_ms=min(samples_ms),
        mean_ms=mean,
        stdev_ms=stdev,
        reps=len(samples_ms),
        # One sample has no spread: its rse is unknown, stored as 100 % (inf is not JSON).
        rse=rse if math.isfinite(rse) else 1.0,
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
    # Repetitions of a reference whose kept figure is checked, interleaved with the submission's:
    # at least this many, and more (up to three times as many) until they add up to `check_ms`
    # of kernel time (a 0.4 ms kernel's four repetitions spread by a few percent).
    check_reps: int = 4
    check_ms: float = 5.0
    # A kept figure stands while the checked repetitions' median is within this fraction of it
    # (or within three times their combined relative standard error, if that is more).
    agree_within: float = 0.02
    # The share of the submission's timed repetitions checked in full (float64, every output),
    # drawn after each launch; one drawn repetition is always checked in full.
    full_check_fraction: float = 0.25

    def warmed_up(
        self, done: int, drawn: int, busy_ms: float, wall_s: float, *, at_speed: bool = False
    ) -> bool:
        """Whether warming up is over after `done` rounds of warm-ups (`drawn` at least, unless
        their wall time is up: a slow kernel keeps the GPU busy from its first launch).
        `at_speed`: the GPU's clock is known to be up already (warmed before the section), so
        the drawn rounds are enough."""
        if done < 1:
            return False
        if wall_s >= self.warmup_wall_seconds:
            return True
        if done < drawn:
            return False
        return at_speed or busy_ms >= self.warmup_seconds * 1000 or done >= drawn + 50

    def done(self, samples: list[float], elapsed_s: float) -> bool:
        """Stop at max_reps, or once min_reps are in and the mean is tight or time is up."""
        n = len(samples)
        if n >= self.max_reps:
            return True
        if n < 2:
            return False  # one sample has no spread
        if n < self.min_reps:
            # The budget stops a kernel so slow that min_reps would take past it: the lock
            # is held alone for the budget, not for min_reps of a slow kernel.
            return elapsed_s >= self.budget_seconds
        return (
            elapsed_s >= self.budget_seconds or relative_standard_error(samples) < self.target_rse
        )

    def agrees(self, kept: TimingStats, checked: list[float]) -> bool:
        """Whether a kept figure stands beside repetitions of the same kernel measured now."""
        if not checked or kept.median_ms <= 0:
            return False
        now = statistics.median(checked)
        spread = math.hypot(kept.rse, _finite(relative_standard_error(checked)))
        # The epsilon keeps a ratio of exactly agree_within (2.04 / 2.0) on the standing side.
        return abs(now / kept.median_ms - 1.0) <= max(self.agree_within, 3.0 * spread) + 1e-12

    def section_seconds(self, timed_arms: int, checked_arms: int) -> float:
        """The longest a timed section of these arms may hold the GPU alone: each timed arm
        its budget, the warm-up its wall time, a checked arm a tenth of the budget."""
        return self.budget_seconds * (timed_arms + 0.1 * checked_arms) + self.warmup_wall_seconds


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
    """Overwrites a buffer twice the L2's size, evicting whatever the last rep left there; its
    `gate` (LaunchGate) then holds the stream until the repetition's launches are queued."""

    def __init__(self, *, gate: bool = True) -> None:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        self.nbytes = max(int(props.get("l2CacheSize", 0)) * 2, 8 << 20)
        self.buffer = cupy.empty(self.nbytes, dtype=cupy.uint8)
        self._value = 0
        self.gate: LaunchGate | None = None
        # Why the gate is missing where it was asked for ("" when it is there): for the log.
        self.gate_problem = ""
        if gate:
            try:
                self.gate = LaunchGate()
            except Exception as exc:  # no mapped pinned memory here: timed without the gate
                self.gate_problem = f"no launch gate ({type(exc).__name__}: {exc})"

    def flush(self) -> None:
        import cupy

        self._value = (self._value + 1) % 251
        cupy.cuda.runtime.memsetAsync(
            self.buffer.data.ptr, self._value, self.nbytes, cupy.cuda.get_current_stream().ptr
        )


_GATE_SOURCE = r"""
extern "C" __global__ void kg_launch_gate(unsigned long long flag_addr, long long max_cycles) {
    const volatile int* flag = (const volatile int*)flag_addr;
    long long began = clock64();
    while (*flag == 0 && clock64() - began < max_cycles) {
    }
}
"""
# How long the gate holds the stream at most if the host never opens it (a host thread
# descheduled for that long): about 20 ms at the 2 GHz an H100 or H200 runs at.
GATE_MAX_CYCLES = 40_000_000


class LaunchGate:
    """Keeps the stream busy until a repetition's launches are queued, so that its events time
    the kernel and nothing of the host.

    A start event recorded on an idle stream fires at once; if the host then takes a while to
    launch the kernel (CuPy's Python around a launch, cuBLAS choosing its algorithm, the host
    thread preempted on a busy machine), that wait lands between the events. Measured on an
    H100 in a worker under load: cuBLAS's 2048 GEMM read 0.347 to 0.419 ms between gradings,
    and 7 to 15 of every 35 gradings found its kept figure off and timed it again; with the
    gate, 0.3426 to 0.3448 ms, and none did. So before the start event a one-thread kernel
    spins on a flag in pinned host memory; the host records the start, launches the
    repetition, records the end and only then sets the flag (`open`): the GPU runs the events
    and the kernels back to back. The spin ends by itself after GATE_MAX_CYCLES, so a host
    that never opens it costs a few milliseconds, never a hang. The flush before it and the
    gate leave the L2 as the flush left it: the gate's one thread reads host memory only.
    """

    def __init__(self) -> None:
        import cupy

        memory = cupy.cuda.PinnedMemory(8, cupy.cuda.runtime.hostAllocMapped)
        self._flag = cupy.cuda.PinnedMemoryPointer(memory, 0)
        self._host = np.ndarray((1,), dtype=np.int32, buffer=self._flag)
        self._kernel = cupy.RawModule(code=_GATE_SOURCE).get_function("kg_launch_gate")

    def close(self) -> None:
        """Queue the spin: what is launched after it waits until `open`."""
        import cupy

        self._host[0] = 0
        args = (cupy.uint64(self._flag.ptr), cupy.int64(GATE_MAX_CYCLES))
        self._kernel((1,), (1,), args)

    def open(self) -> None:
        self._host[0] = 1


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 1.0


def ratio_spread(a: TimingStats, b: TimingStats) -> float:
    """The relative spread of a.median / b.median: their relative standard errors combined."""
    return math.hypot(_finite(a.rse), _finite(b.rse))


class WrongRepetition(Exception):
    """A timed repetition's output was wrong; `message` says how."""

    def __init__(self, rep: int, message: str) -> None:
        super().__init__(message)
        self.rep = rep
        self.message = message


SUBMISSION, TIMED, CHECKED = "submission", "timed", "checked"
# How a repetition is checked: not at all (a trusted reference), cheaply, or in full.
NO_CHECK, CHEAP, FULL = "none", "cheap", "full"


@dataclass
class Arm:
    """One kernel in a timed section and its samples.

    `measure(rep, check)` prepares repetition `rep`'s inputs, flushes L2, runs the kernel
    between events, waits for it, checks it as `check` says and returns the milliseconds
    between the events; a wrong output raises WrongRepetition.
    """

    name: str
    role: str  # SUBMISSION, TIMED or CHECKED
    measure: Callable[[int, str], float]
    samples: list[float] = field(default_factory=list)
    seconds: float = 0.0  # wall time of this arm's timed repetitions, checks included
    full_checks: int = 0

    def done(self, plan: TimingPlan) -> bool:
        if self.role == CHECKED:
            n = len(self.samples)
            enough = sum(self.samples) >= plan.check_ms or n >= 3 * plan.check_reps
            return n >= plan.check_reps and enough
        return plan.done(self.samples, self.seconds)


def warm_up_check(arm: Arm) -> str:
    """How an untimed warm-up repetition is checked: the submission's cheaply, a trusted
    reference's not at all."""
    return CHEAP if arm.role == SUBMISSION else NO_CHECK


def interleave(
    arms: list[Arm],
    *,
    plan: TimingPlan,
    rng: random.Random,
    first_rep: int = 0,
    warm_up: bool = True,
    after_warm_up: Callable[[list[Arm]], None] | None = None,
    at_speed: Callable[[], bool] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Time the arms together, a repetition of each active arm per round in an order drawn
    at random; returns the next repetition number (every repetition has inputs of its own).

    Warm-ups (each arm in turn, checked cheaply) go on until `plan.warmed_up`; then rounds go
    on until every arm is done, or the section's time (`plan.section_seconds`) is up once
    every arm has a sample. The submission's timed repetitions are checked in full on a random
    share of them, one of the first `min_reps` always. `after_warm_up(arms)` may change the
    arms' roles once the GPU is warm (a kept figure is judged against the clock then).
    `at_speed()`, asked once the drawn warm-ups are done, says whether the GPU's clock is
    already up (see `warm_rounds`): then those are enough.
    """
    rep = first_rep
    began = clock()

    def once(arm: Arm, check: str) -> float:
        nonlocal rep
        ms = arm.measure(rep, check)
        rep += 1
        return ms

    def check_of(arm: Arm, index: int, forced: int) -> str:
        if arm.role != SUBMISSION:
            return NO_CHECK
        if index == forced or rng.random() < plan.full_check_fraction:
            arm.full_checks += 1
            return FULL
        return CHEAP

    if warm_up:
        drawn = plan.warmup_reps + rng.randint(0, plan.extra_warmups)
        busy, done = 0.0, 0
        while True:
            fast = done >= drawn and at_speed is not None and at_speed()
            if plan.warmed_up(done, drawn, busy, clock() - began, at_speed=fast):
                break
            for arm in rng.sample(arms, len(arms)):
                busy += once(arm, warm_up_check(arm))
            done += 1
    if after_warm_up is not None:
        after_warm_up(arms)
    timed = sum(1 for a in arms if a.role != CHECKED)
    section_s = plan.section_seconds(timed, len(arms) - timed)
    forced = rng.randrange(max(1, plan.min_reps))
    extra = {a.name: rng.randint(0, plan.extra_reps) for a in arms if a.role != CHECKED}
    stop_at: dict[str, int] = {}
    timing_began = clock()

    def active(arm: Arm) -> bool:
        if arm.name in stop_at:
            return len(arm.samples) < stop_at[arm.name]
        if arm.done(plan):
            stop_at[arm.name] = len(arm.samples) + extra.get(arm.name, 0)
            return len(arm.samples) < stop_at[arm.name]
        return True

    while True:
        running = [a for a in arms if active(a)]
        if not running:
            break
        over = clock() - timing_began >= section_s
        if over and all(a.samples for a in arms):
            break
        for arm in rng.sample(running, len(running)):
            t0 = clock()
            arm.samples.append(once(arm, check_of(arm, len(arm.samples), forced)))
            arm.seconds += clock() - t0
    return rep


def warm_rounds(
    arms: list[Arm],
    *,
    plan: TimingPlan,
    first_rep: int = 0,
    at_speed: Callable[[], bool] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Rounds of every arm, untimed (the submission checked cheaply), until the GPU has been
    busy `plan.warmup_seconds` or `plan.warmup_wall_seconds` have passed, one round at least:
    the clocks' ramp from idle, and what a process does the first time it launches (loading
    modules, a library's handle), done before a timed section. `at_speed()`, asked after each
    round, may end it sooner: the clock is up already (a GPU busy with other work).
    Returns the next repetition's number."""
    rep = first_rep
    began = clock()
    busy = 0.0
    while True:
        for arm in arms:
            busy += arm.measure(rep, warm_up_check(arm))
            rep += 1
        if busy >= plan.warmup_seconds * 1000 or clock() - began >= plan.warmup_wall_seconds:
            return rep
        if at_speed is not None and at_speed():
            return rep
