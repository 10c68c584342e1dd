"""The run stage's sandboxed child: warm up ahead of need, then grade one submission's cases.

`warm_up` runs before any request (a prestarted child, graders.sandbox.prestart): CuPy imported,
the context made, the printf buffer bounded, and the grader's own kernels loaded from this
child's private copy of the worker's kernel cache. `run_in_child(payload)` then grades the
payload's cases in order, each under the GPU's lock held shared, and tells the parent about each
case as it starts and ends (graders.sandbox.progress); then, with the lock held alone, it times
the timed case. It stops at the first error that leaves the CUDA context unusable; the parent
then runs the remaining cases in a fresh child.

The payload holds no deployment secret: the parent derives the seeds.
"""

from __future__ import annotations

import os
import time
import traceback
from typing import Any

from graders.gpu import gpu_lock
from graders.results import CaseResult
from graders.run import output
from graders.run.cases import grade_case
from graders.run.context import Context, Kernel, load
from graders.run.harness import KernelFailure, classify_cuda_error, cuda_error_name
from graders.run.python_oracle import OracleCodeError
from graders.run.timed import TimedCase, time_case
from graders.run.warmup import exercise
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


def warm_up() -> None:
    """Ahead of need: CuPy, the context and the grader's kernels, without holding up timing.

    Importing CuPy touches no GPU; the context and the kernels do, so only they wait for a
    timed section on the GPU to end (the lock, shared).
    """
    import cupy as cp

    with _lock().shared():
        cp.cuda.Device().use()
        output.limit_printf()
        exercise()
        cp.cuda.Device().synchronize()


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


def _one_case(ctx: Context, lab: LabSpec, name: str, seed: int, lock: GpuLock) -> CaseResult:
    case = lab.case(name)
    progress.step(f"case:{name}", lab.limits.case_seconds + CASE_SLACK_S)
    progress.report({"start": name, "at": time.time()})
    with lock.shared(*progress.lock_callbacks(f"case {name}")), output.withheld_output(case):
        try:
            return grade_case(ctx, case, seed)
        except (KernelFailure, OracleCodeError):
            raise
        except Exception as exc:
            ctx.log.append(f"case {name}: {traceback.format_exc()}")
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


def run_in_child(payload: dict[str, Any]) -> dict[str, Any]:
    """Grade the payload's cases, then time the timed case; see the module docstring."""
    import cupy as cp

    began, kernels_before = time.monotonic(), _cached_kernels()
    lab = load_lab(payload["lab_folder"])
    output.limit_printf()
    seeds: dict[str, int] = payload["seeds"]
    lock = _lock(payload.get("lock_dir"))
    try:
        submission = load({"name": "submission", **payload["submission"]}, lab)
    except Exception as exc:  # the driver refused the student's module: their verdict, not ours
        message = _load_failure_message(exc)
        refused = [
            CaseResult.unjudged(lab.case(n), seeds[n], message, "launch_error").to_dict()
            for n in payload["cases"]
        ]
        return {"cases": refused, "stopped": "", "gpu": None, "log": [str(exc)]}
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    refs: dict[str, Kernel] = {r["name"]: load(r, lab) for r in payload.get("references", [])}
    ctx = Context(lab, submission, refs, int(props.get("sharedMemPerBlock", 0)))
    results: list[CaseResult] = []
    stopped = ""
    lab_fault = ""
    names = list(payload["cases"])
    for i, name in enumerate(names):
        try:
            result = _one_case(ctx, lab, name, seeds[name], lock)
        except OracleCodeError as exc:
            # The lab's own code failed: no verdict on the student, and no case after it runs.
            lab_fault = str(exc)
            ctx.log.append(f"case {name}: {traceback.format_exc()}")
            message = "Not run: the lab's own Python oracle failed; this is not your fault."
            results += [CaseResult.unjudged(lab.case(n), seeds[n], message) for n in names[i:]]
            break
        except KernelFailure as exc:
            result = CaseResult.unjudged(lab.case(name), seeds[name], exc.message, exc.verdict)
            if exc.sticky:
                stopped = exc.verdict
                results.append(result)
                progress.report({"done": result.to_dict()})
                why = "it did not finish" if exc.verdict == "timeout" else "its error"
                message = f"Not run in this process: case {name} stopped the kernel ({why})."
                results += [
                    CaseResult.unjudged(lab.case(n), seeds[n], message) for n in names[i + 1 :]
                ]
                break
        results.append(result)
        progress.report({"done": result.to_dict()})
    progress.step("cases", None)
    ctx.log.append(
        f"{len(results)} cases in {time.monotonic() - began:.2f} s; "
        f"{_cached_kernels() - kernels_before} kernels compiled for them"
    )
    gpu = None
    measured: dict[str, Any] = {}
    timed_name = lab.timing.case if lab.timing else None
    timed = next((r for r in results if r.name == timed_name and r.passed), None)
    if payload.get("timing") and timed is not None and not stopped and not lab_fault:
        progress.report({"phase": "timing", "cases": [r.to_dict() for r in results]})
        progress.step("timing", _timing_limit(lab, len(refs)))
        try:
            with lock.exclusive(*progress.lock_callbacks("timing")):
                found = time_case(
                    ctx,
                    lab.case(timed.name),
                    seeds[timed.name],
                    nonce=int(payload.get("nonce", 0)),
                    cached=payload.get("cached_references") or {},
                    flusher=L2Flusher(),
                )
        except OracleCodeError as exc:
            lab_fault = str(exc)
            ctx.log.append(f"timing: {traceback.format_exc()}")
            found = TimedCase(failure="", verdict="")
        gpu = found.gpu
        if found.failure:
            timed.passed, timed.points = False, 0.0
            timed.verdict, timed.message = found.verdict, found.failure
            stopped = found.verdict if found.sticky else ""
        elif not lab_fault:  # with one, the timed case keeps its verdict, without a time
            timed.timing = found.stats
            timed.reference_timings = found.references
            measured = {k: v.to_dict() for k, v in found.measured.items()}
    output.flush_all_output(device=False)  # the child ends with os._exit, which skips C's flush
    return {
        "cases": [r.to_dict() for r in results],
        "stopped": stopped,
        "gpu": gpu,
        "log": ctx.log,
        "measured_references": measured,
        "lab_fault": lab_fault,
    }


def _timing_limit(lab: LabSpec, n_refs: int) -> float:
    assert lab.timing is not None
    per_kernel = 4 * lab.timing.budget_seconds + 2 * lab.limits.case_seconds + 10
    return (1 + n_refs) * per_kernel + 30
