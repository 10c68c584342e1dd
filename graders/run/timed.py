"""The timed case, inside the run child: the submission, then the references it is scored against.

Every repetition gets inputs made for it from the grading's random nonce and is checked against
the float64 answer on the device (graders.timing.repetitions); the whole section holds the GPU's
lock alone. A reference's timing kept from an earlier grading is reused when it was taken on
this GPU model and driver under a like clock and temperature (graders.timing.references);
otherwise it is timed here and handed back for the worker to keep.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from graders.gpu import gpu_info
from graders.results import TimingStats
from graders.run.buffers import DeviceArrays
from graders.run.cases import EVERY_LAUNCH_HINT
from graders.run.context import Context, Kernel
from graders.run.harness import LaunchPlan, as_failure, launch_all
from graders.run.inputs import scalar_values
from graders.run.judge import judge
from graders.run.python_oracle import OracleCodeError
from graders.spec import CaseSpec, LabSpec
from graders.timing.references import remeasure_reason
from graders.timing.repetitions import L2Flusher, TimingPlan, WrongRepetition, time_repetitions


@dataclass
class TimedCase:
    """What the timed section found; `failure` is a sentence when the submission failed it."""

    stats: TimingStats | None = None
    failure: str = ""
    verdict: str = ""
    sticky: bool = False
    references: dict[str, TimingStats] = field(default_factory=dict)
    measured: dict[str, TimingStats] = field(default_factory=dict)
    gpu: dict[str, Any] | None = None


def timing_plan(lab: LabSpec) -> TimingPlan:
    t = lab.timing
    assert t is not None
    return TimingPlan(t.budget_seconds, t.target_rse, t.min_reps, t.max_reps)


def _cublas(lab: LabSpec, arrays: DeviceArrays) -> Any:
    """cuBLAS (through cupy.matmul) on the lab's first two inputs into its first output."""
    import cupy as cp

    ins = [arrays.arrays[p.name].view for p in lab.params if p.is_array and p.kind == "in"]
    out = next(arrays.arrays[p.name].view for p in lab.params if p.is_output)
    return lambda: cp.matmul(ins[0], ins[1], out=out)


def time_kernel(
    ctx: Context,
    kernel: Kernel,
    case: CaseSpec,
    seed: int,
    *,
    nonce: int,
    flusher: L2Flusher,
    rng: random.Random,
) -> TimingStats:
    """Median time of one kernel on the case, every repetition fresh and checked."""
    lab = ctx.lab
    names = lab.sizes_for(case, kernel.declarations)
    arrays = DeviceArrays.allocate(lab, names, literals=case.inputs)
    try:
        scalars = scalar_values(lab.params, names, seed)
        if kernel.builtin == "cublas":
            run = _cublas(lab, arrays)
        else:
            plan = LaunchPlan.build(lab, names, arrays, scalars)
            run = lambda: launch_all(kernel.funcs, plan)  # noqa: E731

        def prepare(rep: int) -> None:
            # New inputs (a hand-written input is generated from its init), scratch data
            # refilled, outputs back to the sentinel.
            arrays.generate(seed, nonce=nonce, rep=rep)

        def check(rep: int) -> str | None:
            j = judge(ctx, case, arrays, scalars, check_inputs=False)
            return None if j.passed else j.message

        return time_repetitions(
            run,
            prepare,
            check,
            plan=timing_plan(lab),
            flusher=flusher,
            launch_timeout_s=lab.limits.case_seconds,
            rng=rng,
        )
    finally:
        arrays.release()


def _stamp(stats: TimingStats, info: dict[str, Any]) -> TimingStats:
    stats.measured_at = datetime.now(UTC).isoformat(timespec="seconds")
    stats.gpu = str(info.get("name") or "")
    stats.driver = str(info.get("driver") or "")
    stats.sm_clock_mhz = info.get("sm_clock_mhz")
    stats.temperature_c = info.get("temperature_c")
    return stats


def time_case(
    ctx: Context,
    case: CaseSpec,
    seed: int,
    *,
    nonce: int,
    cached: dict[str, dict[str, Any]],
    flusher: L2Flusher,
) -> TimedCase:
    """Time the submission, then each reference (kept or measured); call with the lock held."""
    rng = random.Random(nonce)
    out = TimedCase()
    try:
        stats = time_kernel(ctx, ctx.submission, case, seed, nonce=nonce, flusher=flusher, rng=rng)
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
        failure = as_failure(raw, ctx.lab.limits.case_seconds)
        out.verdict, out.sticky = failure.verdict, failure.sticky
        out.failure = f"The first launch passed, but a timed launch failed: {failure.message}"
        return out
    info = gpu_info().to_dict()
    out.gpu = info
    out.stats = _stamp(stats, info)
    now = {"gpu": info.get("name"), "driver": info.get("driver"), **info}
    for name, ref in ctx.references.items():
        kept = cached.get(name)
        why = remeasure_reason(kept, now) if kept else "no timing was kept"
        if kept and why is None:
            out.references[name] = TimingStats(**{**kept, "reused": True})
            continue
        ctx.log.append(f"timing reference {name}: {why}")
        try:
            ref_stats = time_kernel(ctx, ref, case, seed, nonce=nonce, flusher=flusher, rng=rng)
        except OracleCodeError:
            raise
        except Exception as raw:  # a reference is trusted: its failure is ours, not the student's
            ctx.log.append(f"reference {name} failed when timed: {raw}")
            if as_failure(raw, ctx.lab.limits.case_seconds).sticky:
                break
            continue
        out.references[name] = out.measured[name] = _stamp(ref_stats, gpu_info().to_dict())
    return out
