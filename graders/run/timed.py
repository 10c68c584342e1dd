"""The timed case, inside the run child: the submission and its references in one timed section.

Each arm first runs untimed under the lock held shared, until the GPU has been busy long enough
to bring its clock up from idle, or NVML shows the clock up already after a round
(graders.timing.repetitions.warm_rounds; what a fresh process does the first time stays out of
the section too). Then the section holds the GPU's lock alone
(graders.timing.lock), warms up for a few rounds drawn at random (more only if the SM clock fell
meanwhile), and times several arms together, their repetitions interleaved
(graders.timing.repetitions.interleave): the submission; each
reference with no kept figure, or one taken under unlike conditions (graders.timing.references),
timed anew; and a few repetitions of each reference whose kept figure is reused, so that a kept
figure that no longer matches the GPU is noticed in the same run and timed again there.

Every repetition gets inputs made for it from the grading's random nonce, and its events time
the GPU alone: a launch gate holds the stream until the launch is queued
(graders.timing.repetitions.LaunchGate). The submission's output
is checked after every repetition (graders.run.quick: against a trusted reference's output on the
same inputs, in one pass) and in full in float64 on a random share of them; a reference is trusted
and timed unchecked.

Work the lock cannot keep out (another program on the GPU) is watched through NVML
(graders.timing.contention): a section it overlapped is timed again once, after a pause outside
the lock; if it overlaps that one too, the figures are marked `contended` (the worker holds the
performance points back and never keeps such a figure as a reference timing).
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from graders.gpu import gpu_info, sm_clock_mhz
from graders.results import TimingStats
from graders.run import quick
from graders.run.buffers import DeviceArrays
from graders.run.cases import EVERY_LAUNCH_HINT
from graders.run.context import Context, Kernel
from graders.run.harness import GRADER_BUGS, LaunchPlan, as_failure, launch_all
from graders.run.inputs import scalar_values
from graders.run.judge import judge, tolerance
from graders.run.python_oracle import OracleCodeError
from graders.sandbox import progress
from graders.spec import CaseSpec, LabSpec
from graders.timing import contention
from graders.timing.lock import GpuLock
from graders.timing.references import remeasure_reason
from graders.timing.repetitions import (
    CHECKED,
    FULL,
    NO_CHECK,
    SUBMISSION,
    TIMED,
    Arm,
    L2Flusher,
    TimingPlan,
    WrongRepetition,
    interleave,
    ratio_spread,
    stats_from_samples,
    wait_event,
    warm_rounds,
)

# Attempts at a section that work outside the lock overlapped, and the pause between them.
ATTEMPTS = 2
PAUSE_S = 0.5
# Seconds beyond a section's own budget before the parent kills the child (graders.sandbox).
SECTION_SLACK_S = 10.0
# Warming under the shared lock stops after a round once the SM clock is at least this share
# of the most it may run at; the section's own warm-up stops at its drawn rounds while the
# clock is at least this share of the one that warming left it at.
AT_SPEED_SHARE = 0.97


@dataclass
class TimedCase:
    """What the timed section found; `failure` is a sentence when the submission failed it."""

    stats: TimingStats | None = None
    failure: str = ""
    verdict: str = ""
    sticky: bool = False
    # What the score compares against: kept figures that the run confirmed, or measured here.
    references: dict[str, TimingStats] = field(default_factory=dict)
    # Measured here and fit to keep (never under contention): for the worker to store.
    measured: dict[str, TimingStats] = field(default_factory=dict)
    gpu: dict[str, Any] | None = None
    # A sentence for staff when other work overlapped every attempt; "" when none did.
    contended: str = ""
    notes: list[str] = field(default_factory=list)


# An arm's repetition: (repetition, how it is checked) -> milliseconds between its events.
Measure = Callable[[int, str], float]


def timing_plan(lab: LabSpec) -> TimingPlan:
    t = lab.timing
    assert t is not None
    return TimingPlan(t.budget_seconds, t.target_rse, t.min_reps, t.max_reps)


def section_limit(lab: LabSpec, n_refs: int) -> float:
    """The most one attempt of the section may hold the GPU alone, with its slack: the parent's
    step limit. Every reference timed anew, and a second phase for kept ones that disagreed."""
    plan = timing_plan(lab)
    return plan.section_seconds(1 + n_refs, n_refs) + plan.warmup_wall_seconds + SECTION_SLACK_S


def _sync() -> None:
    import cupy as cp

    cp.cuda.get_current_stream().synchronize()


def _cublas(lab: LabSpec, arrays: DeviceArrays) -> Callable[[], None]:
    """cuBLAS (through cupy.matmul) on the lab's first two inputs into its first output."""
    import cupy as cp

    ins = [arrays.arrays[p.name].view for p in lab.params if p.is_array and p.kind == "in"]
    out = next(arrays.arrays[p.name].view for p in lab.params if p.is_output)
    return lambda: cp.matmul(ins[0], ins[1], out=out)


class _Prepared:
    """One kernel's arrays and launches on the timed case."""

    def __init__(
        self, ctx: Context, kernel: Kernel, case: CaseSpec, seed: int, *, guards: bool
    ) -> None:
        lab = ctx.lab
        self.kernel = kernel
        self.seed = seed
        self.names = lab.sizes_for(case, kernel.declarations)
        self.arrays = DeviceArrays.allocate(lab, self.names, guards=guards, literals=case.inputs)
        self.scalars = scalar_values(lab.params, self.names, seed)
        if kernel.builtin == "cublas":
            self.run = _cublas(lab, self.arrays)
        else:
            plan = LaunchPlan.build(lab, self.names, self.arrays, self.scalars)
            self.run = lambda: launch_all(kernel.funcs, plan)

    def prepare(self, nonce: int, rep: int) -> None:
        """New inputs (a hand-written input is generated from its init), scratch data refilled,
        outputs back to the sentinel."""
        self.arrays.generate(self.seed, nonce=nonce, rep=rep)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: arr.shape for name, arr in self.arrays.arrays.items()}

    def release(self) -> None:
        self.arrays.release()


def _witness_kernel(ctx: Context, cached: dict[str, dict[str, Any]]) -> Kernel | None:
    """The trusted kernel whose output a repetition is cheaply checked against: the fastest
    reference by the figures kept (it runs once per checked repetition), else cuBLAS, else
    the scoring target, else any reference."""
    refs = ctx.references
    if not refs:
        return None
    timed = {n: float(cached[n]["median_ms"]) for n in refs if cached.get(n, {}).get("median_ms")}
    if timed:
        return refs[min(timed, key=lambda n: timed[n])]
    target = ctx.lab.scoring.target or ""
    for name in ("cublas", target, *refs):
        if name in refs:
            return refs[name]
    return None


class _Checker:
    """The submission's output after a repetition: cheaply against the witness, or in full."""

    def __init__(
        self, ctx: Context, case: CaseSpec, sub: _Prepared, witness: _Prepared | None
    ) -> None:
        self.ctx = ctx
        self.case = case
        self.sub = sub
        self.witness = witness
        self.cheap_misses = 0
        lab = ctx.lab
        self.compared = [
            p
            for p in lab.params
            if p.is_output and p.needs_answer and (p.check == "sum" or quick.fused(p.dtype))
        ]
        if any(p.is_output and p.needs_answer and p not in self.compared for p in lab.params):
            self.witness = None  # an output the fused pass cannot read: full checks only
        if witness is not None:
            # Partial sums may be shaped by the kernel's own declarations (one per block);
            # everything compared element by element must be shaped alike.
            theirs, ours = witness.shapes(), sub.shapes()
            sums = {p.name for p in lab.params if p.check == "sum"}
            if any(theirs[n] != ours[n] for n in ours if n not in sums):
                self.witness = None

    def __call__(self, check: str) -> str | None:
        if check == FULL or self.witness is None:
            return self._full()
        if self._cheap_count() == 0:
            return None
        # Something is off: the full check says what (and overrules the cheap one).
        self.cheap_misses += 1
        return self._full()

    def _full(self) -> str | None:
        j = judge(self.ctx, self.case, self.sub.arrays, self.sub.scalars, check_inputs=False)
        return None if j.passed else j.message

    def _cheap_count(self) -> int:
        """Elements far from the witness's, guard bytes written and never-written outputs, in
        one synchronisation."""
        import cupy as cp

        from graders.run import compare

        assert self.witness is not None
        lab = self.ctx.lab
        self.witness.arrays.fill_from(self.sub.arrays.sources)  # the same inputs, made again
        self.witness.run()
        counts = []
        for arr in self.sub.arrays.arrays.values():
            if arr.guard:
                unsigned = np.dtype(f"u{arr.dtype.itemsize}")
                whole = arr.guard - arr.guard % unsigned.itemsize
                tail = arr.raw[arr.nbytes : arr.nbytes + whole].view(unsigned)
                counts.append(cp.count_nonzero(tail != arr.guard_bits))
        for p in lab.params:
            if not p.is_output:
                continue
            got = self.sub.arrays.arrays[p.name].view
            if p not in self.compared:
                if compare.knows_unwritten(got.dtype):
                    counts.append(cp.count_nonzero(compare.sentinel_mask(got)))
                continue
            want = self.witness.arrays.arrays[p.name].view
            atol, rtol = tolerance(lab, p.dtype, self.sub.names)
            if p.check == "sum":
                g = compare.widen(got).sum()
                r = compare.widen(want).sum()
                far = ~(cp.abs(g - r) <= 2 * atol + 2 * rtol * cp.abs(r))
                counts.append(far.astype(cp.int64) + cp.count_nonzero(compare.sentinel_mask(got)))
            else:
                counts.append(quick.count_far(got, want, atol=atol, rtol=rtol))
        if not counts:
            return 0
        total = counts[0].astype(cp.int64)
        for c in counts[1:]:
            total = total + c
        return int(total)


def _timed_run(
    prepared: _Prepared, flusher: L2Flusher, nonce: int, timeout_s: float
) -> Callable[[int], float]:
    """One repetition of a kernel on fresh inputs, with the L2 flushed and the launch gated
    (graders.timing.repetitions.LaunchGate): its time in ms."""
    import cupy as cp

    start, end = cp.cuda.Event(), cp.cuda.Event()
    stream = cp.cuda.get_current_stream()

    gate = flusher.gate

    def run(rep: int) -> float:
        prepared.prepare(nonce, rep)
        flusher.flush()
        if gate is not None:
            gate.close()
        try:
            start.record(stream)
            prepared.run()
            end.record(stream)
        finally:
            if gate is not None:
                gate.open()
        wait_event(end, time.monotonic() + timeout_s)
        return float(cp.cuda.get_elapsed_time(start, end))

    return run


def _submission_measure(
    sub: _Prepared, checker: _Checker, flusher: L2Flusher, nonce: int, timeout_s: float
) -> Measure:
    timed = _timed_run(sub, flusher, nonce, timeout_s)
    count = [0]

    def measure(rep: int, check: str) -> float:
        elapsed = timed(rep)
        problem = checker(check)
        if problem:
            raise WrongRepetition(count[0], problem)
        count[0] += 1
        return elapsed

    return measure


def _reference_measure(ref: _Prepared, flusher: L2Flusher, nonce: int, timeout_s: float) -> Measure:
    timed = _timed_run(ref, flusher, nonce, timeout_s)

    def measure(rep: int, check: str) -> float:
        assert check == NO_CHECK  # a reference is trusted: timed unchecked
        return timed(rep)

    return measure


def _stamp(stats: TimingStats, info: dict[str, Any]) -> TimingStats:
    stats.measured_at = datetime.now(UTC).isoformat(timespec="seconds")
    stats.gpu = str(info.get("name") or "")
    stats.driver = str(info.get("driver") or "")
    stats.sm_clock_mhz = info.get("sm_clock_mhz")
    stats.temperature_c = info.get("temperature_c")
    return stats


@dataclass
class _Attempt:
    sub: Arm
    timed: dict[str, Arm]
    checked: dict[str, Arm]
    retimed: dict[str, Arm]
    busy: dict[int, int]
    full_checks: int
    kept: dict[str, TimingStats]
    waited: float  # seconds waited for the lock alone
    section: float  # seconds it was held alone


def at_speed_since(mhz: int | None, read: Callable[[], int | None]) -> bool:
    """Whether the GPU's SM clock now (`read()`) is within AT_SPEED_SHARE of `mhz`: the most
    it may run at (the warm-up under the shared lock), or the clock that warm-up left it at
    (the section's own); False where either is unknown (then warming goes by the GPU's busy
    time, as it would without)."""
    if not mhz:
        return False
    now = read()
    return now is not None and now >= AT_SPEED_SHARE * mhz


def _first_calls(arms: list[Arm]) -> dict[str, float]:
    """Wall seconds of each arm's first repetition (what a process does the first time it
    launches a kernel or calls a library shows there), filled in as they run."""
    firsts: dict[str, float] = {}
    for arm in arms:

        def measure(
            rep: int, check: str, *, _arm: Arm = arm, _inner: Measure = arm.measure
        ) -> float:
            if _arm.name in firsts:
                return _inner(rep, check)
            began = time.monotonic()
            try:
                return _inner(rep, check)
            finally:
                firsts[_arm.name] = time.monotonic() - began

        arm.measure = measure
    return firsts


def _one_attempt(
    ctx: Context,
    case: CaseSpec,
    seed: int,
    *,
    nonce: int,
    cached: dict[str, dict[str, Any]],
    flusher: L2Flusher,
    rng: random.Random,
    lock: GpuLock,
) -> _Attempt:
    """One timed section (primed under the lock held shared, then run with it held alone);
    raises what the submission did."""
    lab = ctx.lab
    plan = timing_plan(lab)
    timeout = lab.limits.case_seconds
    prepared: list[_Prepared] = []
    kept: dict[str, TimingStats] = {}

    marks: dict[str, float] = {}

    def judge_kept(arms: list[Arm]) -> None:
        """With the GPU warm: which kept figures may stand, to be checked beside the
        submission (graders.timing.references), and which are timed anew."""
        marks["warm"] = time.monotonic()
        now = {**gpu_info().to_dict()}
        now["gpu"] = now.get("name")
        for arm in arms:
            k = cached.get(arm.name) if arm.role == TIMED else None
            why = remeasure_reason(k, now) if k else "no timing was kept"
            if k and why is None:
                kept[arm.name] = TimingStats(**{**k, "reused": True})
                arm.role = CHECKED
            elif arm.role == TIMED:
                ctx.log.append(f"timing reference {arm.name}: {why}")

    start = time.monotonic()
    try:
        sub = _Prepared(ctx, ctx.submission, case, seed, guards=True)
        prepared.append(sub)
        witness_kernel = _witness_kernel(ctx, cached)
        witness = None
        if witness_kernel is not None:
            witness = _Prepared(ctx, witness_kernel, case, seed, guards=False)
            prepared.append(witness)
        checker = _Checker(ctx, case, sub, witness)
        measure = _submission_measure(sub, checker, flusher, nonce, timeout)
        arms = [Arm("submission", SUBMISSION, measure)]
        refs: dict[str, _Prepared] = {}
        for name, kernel in ctx.references.items():
            refs[name] = _Prepared(ctx, kernel, case, seed, guards=False)
            prepared.append(refs[name])
            arms.append(Arm(name, TIMED, _reference_measure(refs[name], flusher, nonce, timeout)))
        prepared_s = time.monotonic() - start
        firsts = _first_calls(arms)
        with lock.shared(*progress.lock_callbacks("timing")) as shared_wait:
            primed = time.monotonic()
            top = sm_clock_mhz(most=True)
            rep = warm_rounds(arms, plan=plan, at_speed=lambda: at_speed_since(top, sm_clock_mhz))
            _sync()
            primed_mhz = sm_clock_mhz()
            primed_s = time.monotonic() - primed
        with lock.exclusive(*progress.lock_callbacks("timing")) as waited:
            began = time.monotonic()
            window = contention.Window.open(users=lock.users)
            rep = interleave(
                arms,
                plan=plan,
                rng=rng,
                first_rep=rep,
                after_warm_up=judge_kept,
                at_speed=lambda: at_speed_since(primed_mhz, sm_clock_mhz),
            )
            ended = time.monotonic()
            by_name = {a.name: a for a in arms}
            disagree = [
                n for n in kept if n in by_name and not plan.agrees(kept[n], by_name[n].samples)
            ]
            retimed = {}
            if disagree:
                # Phase two, in the same section: those references timed anew, beside the
                # submission's own repetitions again.
                again = [Arm("submission", SUBMISSION, arms[0].measure)]
                again += [Arm(n, TIMED, by_name[n].measure) for n in disagree]
                interleave(again, plan=plan, rng=rng, first_rep=rep, warm_up=False)
                retimed = {a.name: a for a in again[1:]}
            _sync()
            window.close()
            section = time.monotonic() - began
        # After the lock is let go: NVML's sample that covers a short section may come later.
        busy = window.others()
        warm = marks.get("warm", began)
        ctx.log.append(
            f"timing: arms prepared in {prepared_s:.3f} s, {shared_wait:.3f} s waiting to share "
            f"the GPU, warmed {primed_s:.3f} s sharing it (clock "
            f"{primed_mhz or '?'} MHz), then alone: warm-up {warm - began:.3f} s, then "
            f"{ended - warm:.3f} s for " + ", ".join(f"{len(a.samples)} of {a.name}" for a in arms)
        )
        ctx.log.append(
            "timing: first repetitions "
            + ", ".join(f"{name} {seconds:.3f} s" for name, seconds in firsts.items())
        )
        if window.note:
            ctx.log.append(f"timing: {window.note}")
        return _Attempt(
            sub=arms[0],
            timed={a.name: a for a in arms if a.role == TIMED},
            checked={a.name: a for a in arms if a.role == CHECKED},
            retimed=retimed,
            busy=busy,
            full_checks=arms[0].full_checks,
            kept=kept,
            waited=waited,
            section=section,
        )
    finally:
        for p in prepared:
            p.release()


def time_case(
    ctx: Context,
    case: CaseSpec,
    seed: int,
    *,
    nonce: int,
    cached: dict[str, dict[str, Any]],
    flusher: L2Flusher,
    lock: GpuLock,
) -> TimedCase:
    """Time the submission beside its references; see the module docstring."""
    lab = ctx.lab
    rng = random.Random(nonce)
    out = TimedCase()
    if flusher.gate_problem:
        ctx.log.append(f"timing: {flusher.gate_problem}")
    limit = section_limit(lab, len(ctx.references))
    attempt: _Attempt | None = None
    for tries in range(ATTEMPTS):
        progress.step("timing", limit)
        try:
            attempt = _one_attempt(
                ctx,
                case,
                seed,
                nonce=nonce,
                cached=cached,
                flusher=flusher,
                rng=rng,
                lock=lock,
            )
        except OracleCodeError:
            raise  # the lab's oracle.py failed: the grader's failure, not the student's
        except WrongRepetition as exc:
            out.verdict = "wrong_answer"
            out.failure = (
                f"The first launch gave the right answer, but timed launch {exc.rep + 1} (on new "
                f"inputs) was wrong: {exc.message}" + EVERY_LAUNCH_HINT
            )
            return out
        except Exception as raw:
            if type(raw).__name__ in GRADER_BUGS:
                raise  # the grader's own bug: never the student's verdict (graders.run.stage)
            failure = as_failure(raw, lab.limits.case_seconds)
            out.verdict, out.sticky = failure.verdict, failure.sticky
            out.failure = f"The first launch passed, but a timed launch failed: {failure.message}"
            return out
        ctx.log.append(
            f"timing: section {attempt.section:.3f} s, {attempt.waited:.3f} s waiting for the lock"
        )
        if not attempt.busy:
            break
        said = contention.describe(attempt.busy)
        out.notes.append(f"attempt {tries + 1}: {said}")
        ctx.log.append(f"timing: {said}")
        if tries + 1 < ATTEMPTS:
            progress.step("timing-pause", PAUSE_S + 30)
            time.sleep(PAUSE_S)
    assert attempt is not None
    if attempt.busy:
        out.contended = "; ".join(out.notes)
    info = gpu_info().to_dict()
    out.gpu = info
    out.stats = _stamp(stats_from_samples(attempt.sub.samples), info)
    ctx.log.append(
        f"timing: {len(attempt.sub.samples)} repetitions, {attempt.full_checks} checked in full"
    )
    for name, arm in {**attempt.timed, **attempt.checked, **attempt.retimed}.items():
        if arm.samples:
            was = f" (kept {attempt.kept[name].median_ms:.4g})" if name in attempt.kept else ""
            ctx.log.append(
                f"timing: {name} {arm.role} median {np.median(arm.samples):.4g} ms over "
                f"{len(arm.samples)}{was}"
            )
    for name, arm in {**attempt.timed, **attempt.retimed}.items():
        if not arm.samples:
            continue
        stats = _stamp(stats_from_samples(arm.samples), info)
        out.references[name] = stats
        if not out.contended:
            out.measured[name] = dataclasses.replace(stats)  # kept without this run's ratio
    for name, arm in attempt.checked.items():
        if name in attempt.retimed:
            ctx.log.append(f"timing reference {name}: the kept figure disagreed; timed again")
            continue
        stats = attempt.kept[name]
        stats.check_median_ms = float(np.median(arm.samples)) if arm.samples else None
        stats.check_reps = len(arm.samples)
        out.references[name] = stats
    for stats in out.references.values():
        stats.ratio = out.stats.median_ms / stats.median_ms if stats.median_ms > 0 else None
        if stats.ratio is not None:
            stats.ratio_spread = stats.ratio * ratio_spread(out.stats, stats)
    return out
