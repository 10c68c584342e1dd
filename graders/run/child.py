"""The run stage's sandboxed child: warm up ahead of need, then grade one submission's cases.

`warm_up` runs before any request (a prestarted child, graders.sandbox.prestart): CuPy imported,
the context made, the printf buffer bounded, and the grader's own kernels loaded from this
child's private copy of the worker's kernel cache. `run_in_child(payload)` then grades the
payload's cases in order, each under the GPU's lock held shared (alone, with `alone`: a grading
run again by itself after it ran out of memory beside others), and tells the parent about each
case as it starts and ends (graders.sandbox.progress). It stops at the first error that leaves
the CUDA context unusable; the parent then runs the remaining cases in a fresh child.

Hidden cases come last, after the timed section: nothing a kernel learns in a hidden case (its
sizes, its data, kept in `__device__` memory) can reach the student through a later launch's
output or a later case's message. Once a hidden case has started, the rest of this process's
output goes nowhere, any case after it is reported as pass or fail only, and no timing runs in
it. The timed section's result goes to the parent at once, as a progress record, so a hidden
case that crashes the child afterwards cannot lose it.

The payload holds no deployment secret: the parent derives the seeds.
"""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from typing import Any

from graders.gpu import gpu_lock
from graders.results import CaseResult
from graders.run import output, stack
from graders.run.cases import grade_case
from graders.run.context import Context, Kernel, load
from graders.run.harness import KernelFailure, classify_cuda_error, cuda_error_name
from graders.run.marks import Marks
from graders.run.python_oracle import OracleCodeError
from graders.run.timed import TimedCase, time_case
from graders.run.warmup import lab_dtypes
from graders.sandbox import progress
from graders.spec import LabSpec, load_lab
from graders.timing.lock import GpuLock
from graders.timing.repetitions import L2Flusher

# Seconds a case may take beyond its own limit (making inputs, the answer, the checks) before
# the parent kills the child: a kernel whose printf the driver expands for minutes ends here.
CASE_SLACK_S = 15.0


def _cached_kernels() -> int:
    """Files in this child's CuPy cache: more at the end than at the start means it compiled."""
    folder = os.environ.get("CUPY_CACHE_DIR", "")
    try:
        return len(os.listdir(folder)) if folder else 0
    except OSError:
        return 0


def _lock(lock_dir: str | None = None) -> GpuLock:
    return gpu_lock(lock_dir or os.environ.get("KERNELGRADER_LOCK_DIR") or None)


# Set once a hidden case starts in this process (see the module docstring).
_hidden_seen = False
WITHHELD = (
    "Withheld until the due date: this case ran after a hidden case in the same process, so "
    "its details could carry what the kernel saw there. It is reported as passed or failed."
)


def _free_pool() -> None:
    """Hand the memory CuPy's pool keeps back to the driver, for the gradings beside this one."""
    import cupy as cp

    with contextlib.suppress(Exception):
        cp.get_default_memory_pool().free_all_blocks()


def _out_of_memory(exc: BaseException) -> bool:
    name = cuda_error_name(exc)
    text = str(exc).lower()
    return (
        name in ("CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation")
        or type(exc).__name__ == "OutOfMemoryError"
        or "out of memory" in text
    )


def warm_up() -> None:
    """Ahead of need: CuPy, the context and the grader's kernels, without holding up timing.

    Importing CuPy touches no GPU. Making the context does: NVML counts a new context's
    process among those using the SMs for about two seconds (measured on an H100), so it is
    made under the lock, shared, which also registers this process as one of the lock's
    users (graders.timing.contention). The kernels run on the GPU, so they wait for a timed
    section on the GPU to end too. The kernels are loaded a few at a
    time (graders.run.warmup.steps), each step under a short hold of the lock that ends with
    its work done: a timed section that comes meanwhile waits for one step (hundredths of a
    second), not for the whole warm-up (seconds: with a spare started after every grading,
    whole warm-ups, then whole data types, held up the next grading's timing). Only float32
    is warmed here (graders.run.warmup.AHEAD); a lab's other types when its grading starts.
    """
    import cupy as cp
    import cupyx  # noqa: F401

    from graders.nvml import visible_handle
    from graders.run.warmup import AHEAD

    # CuPy imports cupyx at the first comparison, and cupyx imports SciPy's sparse module
    # where SciPy is installed: 0.5 s of the first warm-up step on the H100 host, under the
    # lock, where a timed section waited for it. Imported above, before any lock is taken.
    # NVML likewise: the timed section's warm-up asks it for the SM clock first thing, and
    # its first use in a process loads and starts the library.
    visible_handle()
    lock = _lock()
    with lock.shared():
        cp.cuda.Device().use()
        output.limit_printf()  # makes the context
    _warm(list(AHEAD), lock, fused=True)


def _warm(dtypes: list[str], lock: GpuLock, *, fused: bool) -> None:
    """The warm-up's steps for `dtypes` (graders.run.warmup.run_locked)."""
    from graders.run.warmup import run_locked, steps

    run_locked(steps(dtypes, fused=fused), lock)


def _load_failure_message(exc: BaseException) -> str:
    if cuda_error_name(exc) == "CUDA_ERROR_OUT_OF_MEMORY" or "out of memory" in str(exc).lower():
        return (
            "The GPU could not load the kernel: it asks for more memory than the GPU has (a very "
            "large __device__ array does this). Make the arrays it declares smaller."
        )
    return (
        f"The GPU could not load the kernel ({cuda_error_name(exc)}); check what it declares "
        "at file scope."
    )


def _one_case(
    ctx: Context, lab: LabSpec, name: str, seed: int, lock: GpuLock, *, alone: bool
) -> CaseResult:
    global _hidden_seen
    case = lab.case(name)
    if case.hidden and not _hidden_seen:
        _hidden_seen = True
        output.withhold_from_now()
    progress.step(f"case:{name}", lab.limits.case_seconds + CASE_SLACK_S)
    progress.report({"start": name, "at": time.time()})
    hold = lock.exclusive if alone else lock.shared
    began = time.monotonic()
    with hold(*progress.lock_callbacks(f"case {name}")) as waited, output.withheld_output(case):
        try:
            result = grade_case(ctx, case, seed)
            ctx.log.append(
                f"case {name}: {time.monotonic() - began - waited:.3f} s, "
                f"{waited:.3f} s waiting for the lock"
            )
            return result
        except (KernelFailure, OracleCodeError):
            raise
        except Exception as exc:
            ctx.log.append(f"case {name}: {traceback.format_exc()}")
            if _out_of_memory(exc):
                raise KernelFailure("out_of_memory", _oom_message(exc)) from exc
            if "CUDA" in type(exc).__name__:  # surfaced after the launch, by a later call
                raise classify_cuda_error(exc) from exc
            # A failure the kernel caused that has no name of its own: still a verdict.
            raise KernelFailure(
                "kernel_error",
                f"The kernel left the GPU in a state the grader could not check "
                f"({cuda_error_name(exc) or type(exc).__name__}); this case is counted as "
                "failed. A crash or a corrupted memory access can cause this.",
                sticky=True,
            ) from exc
        finally:
            _free_pool()


def _oom_message(exc: BaseException) -> str:
    return (
        "The GPU ran out of memory for this case's arrays and the kernel "
        f"({cuda_error_name(exc) or type(exc).__name__}). Declare smaller arrays at file scope "
        "(__device__), and allocate nothing inside the kernel."
    )


def _after_hidden(result: CaseResult) -> CaseResult:
    """A case that ran after a hidden one in this process: pass or fail, no details."""
    if not _hidden_seen or result.hidden:
        return result
    result.message = WITHHELD
    result.wrong_count, result.first_wrong_index = 0, None
    result.expected = result.got = result.max_abs_error = result.max_rel_error = None
    return result


def _time_it(
    ctx: Context, lab: LabSpec, timed: CaseResult, payload: dict[str, Any], lock: GpuLock
) -> tuple[TimedCase, str]:
    """The timed section for the timed case; (what it found, the lab's own fault if any)."""
    try:
        found = time_case(
            ctx,
            lab.case(timed.name),
            int(payload["seeds"][timed.name]),
            nonce=int(payload.get("nonce", 0)),
            cached=payload.get("cached_references") or {},
            flusher=L2Flusher(),
            lock=lock,
        )
    except OracleCodeError as exc:
        ctx.log.append(f"timing: {traceback.format_exc()}")
        return TimedCase(failure="", verdict=""), str(exc)
    finally:
        _free_pool()
    return found, ""


def run_in_child(payload: dict[str, Any]) -> dict[str, Any]:
    """Grade the payload's cases, the timed section after the visible ones; see the docstring."""
    import cupy as cp

    began, kernels_before = time.monotonic(), _cached_kernels()
    marks = Marks()
    lab = load_lab(payload["lab_folder"])
    output.limit_printf()
    seeds: dict[str, int] = payload["seeds"]
    alone = bool(payload.get("alone"))
    lock = _lock(payload.get("lock_dir"))
    try:
        submission = load({"name": "submission", **payload["submission"]}, lab)
    except Exception as exc:  # the driver refused the student's module: their verdict, not ours
        oom = _out_of_memory(exc)
        message = _load_failure_message(exc)
        refused = [
            CaseResult.unjudged(lab.case(n), seeds[n], message, "launch_error").to_dict()
            for n in payload["cases"]
        ]
        return {
            "cases": refused,
            "stopped": "",
            "gpu": None,
            "log": [str(exc)],
            "out_of_memory": list(payload["cases"]) if oom else [],
        }
    marks.mark("lab_and_module_s")
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    too_deep = stack.refusal(
        stack.frames_of(submission.funcs),
        resident=stack.resident_threads(props),
        limit_bytes=lab.limits.local_memory_mb * stack.MIB,
        several=len(lab.kernels) > 1,
    )
    if too_deep:  # before any launch: the driver reserves the frames at the first one
        refused = [
            CaseResult.unjudged(lab.case(n), seeds[n], too_deep, "launch_error").to_dict()
            for n in payload["cases"]
        ]
        return {"cases": refused, "stopped": "", "gpu": None, "log": [too_deep]}
    rest = lab_dtypes(lab)
    if rest:  # the lab's array types beyond those every spare warms ahead
        _warm(rest, lock, fused=False)
        marks.mark("other_types_s")
    refs: dict[str, Kernel] = {r["name"]: load(r, lab) for r in payload.get("references", [])}
    ctx = Context(lab, submission, refs, int(props.get("sharedMemPerBlock", 0)))
    marks.mark("references_s")
    ctx.log.append(f"before the first case: {marks.line()}")
    results: list[CaseResult] = []
    stopped = ""
    lab_fault = ""
    out_of_memory: list[str] = []
    names = list(payload["cases"])
    # Visible cases first (the parent's order keeps the sanitizer's case first among them),
    # then the timed section, then the hidden cases.
    order = [n for n in names if not lab.case(n).hidden] + [n for n in names if lab.case(n).hidden]
    timed_name = lab.timing.case if lab.timing else None
    timing_done = False
    gpu = None
    measured: dict[str, Any] = {}
    timed_result: dict[str, Any] | None = None
    for i, name in enumerate(order):
        if lab.case(name).hidden and not timing_done and not stopped and not lab_fault:
            timing_done = True
            timed_result, lab_fault = _timed_section(ctx, lab, results, payload, lock)
            if timed_result is not None:
                gpu = timed_result.get("gpu")
                measured = timed_result.get("measured_references") or {}
                stopped = timed_result.get("stopped", "")
                if stopped:
                    results += _not_run(lab, seeds, order[i:], name, "timing")
                    break
        try:
            result = _one_case(ctx, lab, name, seeds[name], lock, alone=alone)
        except OracleCodeError as exc:
            # The lab's own code failed: no verdict on the student, and no case after it runs.
            lab_fault = str(exc)
            ctx.log.append(f"case {name}: {traceback.format_exc()}")
            message = "Not run: the lab's own Python oracle failed; this is not your fault."
            results += [CaseResult.unjudged(lab.case(n), seeds[n], message) for n in order[i:]]
            break
        except KernelFailure as exc:
            result = CaseResult.unjudged(lab.case(name), seeds[name], exc.message, exc.verdict)
            if exc.verdict == "out_of_memory":
                out_of_memory.append(name)
                result.verdict = "launch_error"
            if exc.sticky:
                stopped = exc.verdict
                results.append(_after_hidden(result))
                progress.report({"done": result.to_dict()})
                why = "it did not finish" if exc.verdict == "timeout" else "its error"
                results += _not_run(lab, seeds, order[i + 1 :], name, why)
                break
        result = _after_hidden(result)
        results.append(result)
        progress.report({"done": result.to_dict()})
    else:
        if not timing_done and not stopped and not lab_fault:
            timed_result, lab_fault = _timed_section(ctx, lab, results, payload, lock)
            if timed_result is not None:
                gpu = timed_result.get("gpu")
                measured = timed_result.get("measured_references") or {}
                stopped = stopped or timed_result.get("stopped", "")
    progress.step("cases", None)
    ctx.log.append(
        f"{len(results)} cases in {time.monotonic() - began:.2f} s; "
        f"{_cached_kernels() - kernels_before} kernels compiled for them"
    )
    if timed_result is not None:
        _apply_timed(results, timed_name, timed_result)
    output.flush_all_output(device=False)  # the child ends with os._exit, which skips C's flush
    return {
        "cases": [r.to_dict() for r in results],
        "stopped": stopped,
        "gpu": gpu,
        "log": ctx.log,
        "measured_references": measured,
        "lab_fault": lab_fault,
        "out_of_memory": out_of_memory,
        "contended": (timed_result or {}).get("contended", ""),
    }


def _not_run(
    lab: LabSpec, seeds: dict[str, int], names: list[str], after: str, why: str
) -> list[CaseResult]:
    message = f"Not run in this process: case {after} stopped the kernel ({why})."
    return [CaseResult.unjudged(lab.case(n), seeds[n], message) for n in names]


def _timed_section(
    ctx: Context,
    lab: LabSpec,
    results: list[CaseResult],
    payload: dict[str, Any],
    lock: GpuLock,
) -> tuple[dict[str, Any] | None, str]:
    """Time the timed case if it passed here and no hidden case has run in this process; the
    result (as sent to the parent at once) and the lab's own fault, if any."""
    timed_name = lab.timing.case if lab.timing else None
    timed = next((r for r in results if r.name == timed_name and r.passed), None)
    if not payload.get("timing") or timed is None or _hidden_seen:
        return None, ""
    progress.report({"phase": "timing", "cases": [r.to_dict() for r in results]})
    found, fault = _time_it(ctx, lab, timed, payload, lock)
    progress.step("cases", None)
    if fault:
        return None, fault
    record: dict[str, Any] = {
        "case": timed.name,
        "gpu": found.gpu,
        "failure": found.failure,
        "verdict": found.verdict,
        "stopped": found.verdict if found.sticky else "",
        "stats": found.stats.to_dict() if found.stats else None,
        "references": {k: v.to_dict() for k, v in found.references.items()},
        "measured_references": {k: v.to_dict() for k, v in found.measured.items()},
        "contended": found.contended,
    }
    progress.report({"timed": record})
    return record, ""


def _apply_timed(results: list[CaseResult], name: str | None, record: dict[str, Any]) -> None:
    from graders.results import TimingStats

    timed = next((r for r in results if r.name == name), None)
    if timed is None:
        return
    if record.get("failure"):
        timed.passed, timed.points = False, 0.0
        timed.verdict, timed.message = record["verdict"], record["failure"]
    elif record.get("stats"):
        timed.timing = TimingStats(**record["stats"])
        timed.reference_timings = {
            k: TimingStats(**v) for k, v in (record.get("references") or {}).items()
        }
