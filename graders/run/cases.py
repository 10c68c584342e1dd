"""The run stage, inside the sandboxed child: every case of one submission, then its timing.

`run_cases(payload)` is what `graders.grade.run_in_child` calls. It gets only what it needs
(no deployment secret: the parent derives the seeds), writes a line per started and finished
case to a progress file so the parent can tell which case was running if the child is killed,
and stops at the first error that leaves the CUDA context unusable; the parent then runs the
remaining cases in a fresh child.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from graders.gpu import gpu_info, gpu_lock
from graders.results import HIDDEN_OUTPUT_NOTE, CaseResult, TimingStats
from graders.run import compare, oracles
from graders.run.harness import (
    DeviceArrays,
    KernelFailure,
    LaunchPlan,
    as_failure,
    check_launchable,
    cuda_error_name,
    launch_all,
    load_kernel,
    run_and_wait,
)
from graders.run.inputs import DTYPES, generate_arrays, scalar_values
from graders.spec import CaseSpec, LabSpec, load_lab
from graders.timing.repetitions import L2Flusher, TimingPlan, time_repetitions

DEFAULT_TOLERANCE = (1e-5, 1e-5)
EVERY_LAUNCH_HINT = (
    " A kernel must do its whole work on every launch; state kept between launches (a "
    "__device__ variable or a flag) can cause this."
)


@dataclass
class Kernel:
    """A loaded kernel and the declarations its launch geometry depends on."""

    name: str
    func: Any
    declarations: dict[str, int]
    builtin: str = ""


@dataclass
class Context:
    lab: LabSpec
    submission: Kernel
    references: list[Kernel]
    lock_dir: str | None
    progress: Path | None
    time_cases: bool
    max_shared: int
    log: list[str] = field(default_factory=list)
    gpu: dict[str, Any] | None = None

    def note(self, record: dict[str, Any]) -> None:
        if self.progress is None:
            return
        with self.progress.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def _tolerance(lab: LabSpec, dtype: str, names: dict[str, Any]) -> tuple[float, float]:
    if dtype not in ("float32", "float64"):
        return 0.0, 0.0
    spec = lab.tolerance.get(dtype)
    return spec.for_case(names) if spec else DEFAULT_TOLERANCE


def _expected(
    ctx: Context,
    case: CaseSpec,
    names: dict[str, Any],
    host: dict[str, np.ndarray],
    scalars: dict[str, Any],
) -> dict[str, np.ndarray]:
    """The trusted answer of each output, on the host; computed after the student's run."""
    lab = ctx.lab
    outputs = [p for p in lab.params if p.is_output]
    oracle = lab.expected_oracle
    if oracle.startswith("reference:"):
        ref = next(r for r in ctx.references if r.name == oracle.split(":", 1)[1])
        ref_names = lab.sizes_for(case, ref.declarations)
        arrays = DeviceArrays.allocate(lab, ref_names, host, guard=0)
        plan = LaunchPlan.build(lab, ref_names, arrays, scalars)
        run_and_wait(ref.func, plan, lab.limits.case_seconds)
        result = {p.name: arrays.host(p.name) for p in outputs}
        for arr in arrays.arrays.values():
            arr.raw.fill(0)
        arrays.release()
        return result
    ins = [host[p.name] for p in lab.params if p.is_array and p.is_input]
    floats = [
        float(v)
        for p in lab.params
        if p.kind == "scalar" and p.dtype in ("float32", "float64")
        for v in [scalars[p.name]]
    ]
    first = outputs[0]
    shape = first.shape_for(names)
    return {first.name: oracles.compute(oracle, ins, floats, shape, np.dtype(DTYPES[first.dtype]))}


@dataclass
class Judgement:
    passed: bool
    verdict: str
    message: str
    comparison: compare.Comparison | None = None


def judge(
    ctx: Context, arrays: DeviceArrays, expected: dict[str, np.ndarray], names: dict[str, Any]
) -> Judgement:
    """Guards first (a write past the end is never a pass), then inputs, then the outputs."""
    lab = ctx.lab
    guards = arrays.guard_violations()
    if guards:
        return Judgement(False, "out_of_bounds_write", " ".join(guards))
    modified = arrays.modified_inputs()
    if modified:
        return Judgement(
            False,
            "input_modified",
            f"The kernel changed its input {', '.join(modified)}; inputs are read-only "
            "(the grader checks them after the run).",
        )
    last: Judgement | None = None
    for param in lab.params:
        if not param.is_output or param.name not in expected:
            continue
        got = arrays.host(param.name)
        want = expected[param.name]
        atol, rtol = _tolerance(lab, param.dtype, names)
        if param.check == "sum":
            cmp = compare.compare_sum(got, float(want.reshape(-1)[0]), atol=atol, rtol=rtol)
        else:
            if want.size == 1 and got.size > 1:
                got = got.reshape(-1)[:1]  # a one-number answer lives in element 0
            cmp = compare.compare_elementwise(got, want.reshape(got.shape), atol=atol, rtol=rtol)
        text = compare.describe(cmp, param.name, check=param.check)
        if not cmp.ok:
            verdict = "no_output" if cmp.unwritten_count == cmp.total else "wrong_answer"
            if param.check == "sum" and cmp.got is None:
                verdict = "no_output"
            return Judgement(False, verdict, text, cmp)
        last = Judgement(True, "pass", text, cmp)
    return last or Judgement(False, "wrong_answer", "The lab declares no output to check.")


def _finite(x: float | None) -> float | None:
    """NaN and infinities are not JSON: the service stores and serves these numbers as JSON
    (a kernel that writes NaN must not make its own result page fail). The message says NaN."""
    return x if x is not None and np.isfinite(x) else None


def _fill_comparison(result: CaseResult, j: Judgement) -> None:
    cmp = j.comparison
    if cmp is None:
        return
    result.wrong_count = cmp.wrong_count
    result.first_wrong_index = list(cmp.first_wrong_index) if cmp.first_wrong_index else None
    result.expected = _finite(cmp.expected)
    result.got = _finite(cmp.got)
    result.max_abs_error = _finite(cmp.max_abs_error)
    result.max_rel_error = _finite(cmp.max_rel_error)


def grade_case(ctx: Context, case: CaseSpec, seed: int, flusher: L2Flusher | None) -> CaseResult:
    lab = ctx.lab
    result = CaseResult(
        name=case.name,
        sizes=dict(case.sizes),
        hidden=case.hidden,
        passed=False,
        verdict="",
        message="",
        max_points=float(case.points),
        seed=seed,
    )
    names = lab.sizes_for(case, ctx.submission.declarations)
    host = generate_arrays(lab.params, names, seed)
    scalars = scalar_values(lab.params, names, seed)
    arrays = DeviceArrays.allocate(lab, names, host)
    plan = LaunchPlan.build(lab, names, arrays, scalars)
    check_launchable(ctx.submission.func, plan, max_shared=ctx.max_shared)
    run_and_wait(ctx.submission.func, plan, lab.limits.case_seconds)
    expected = _expected(ctx, case, names, host, scalars)
    j = judge(ctx, arrays, expected, names)
    result.passed, result.verdict, result.message = j.passed, j.verdict, j.message
    _fill_comparison(result, j)
    timed = ctx.time_cases and lab.timing is not None and lab.timing.case == case.name
    if j.passed and timed and flusher is not None:
        _time_case(ctx, case, result, arrays, plan, expected, names, host, scalars, flusher)
    if result.passed:
        result.points = result.max_points
    arrays.release()
    return result


def _timing_plan(lab: LabSpec) -> TimingPlan:
    t = lab.timing
    assert t is not None
    return TimingPlan(t.budget_seconds, t.target_rse, t.min_reps, t.max_reps)


def _time_case(
    ctx: Context,
    case: CaseSpec,
    result: CaseResult,
    arrays: DeviceArrays,
    plan: LaunchPlan,
    expected: dict[str, np.ndarray],
    names: dict[str, Any],
    host: dict[str, np.ndarray],
    scalars: dict[str, Any],
    flusher: L2Flusher,
) -> None:
    lab = ctx.lab
    timeout = lab.limits.case_seconds
    with gpu_lock(ctx.lock_dir) as waited:
        ctx.log.append(f"waited {waited:.2f} s for the GPU's timing lock")
        info = gpu_info()
        ctx.gpu = info.to_dict()
        try:
            stats = time_repetitions(
                lambda: launch_all(ctx.submission.func, plan),
                arrays.prepare,
                plan=_timing_plan(lab),
                flusher=flusher,
                launch_timeout_s=timeout,
            )
        except Exception as raw:
            exc = as_failure(raw, timeout)
            result.passed, result.verdict = False, exc.verdict
            result.message = f"The first launch passed, but a timed launch failed: {exc.message}"
            if exc.sticky:
                raise KernelFailure(exc.verdict, result.message, sticky=True) from raw
            return
        again = judge(ctx, arrays, expected, names)
        if not again.passed:
            result.passed, result.verdict = (
                False,
                again.verdict if again.verdict != "pass" else "wrong_answer",
            )
            result.message = (
                "The first launch gave the right answer, but the output of the last timed "
                f"launch was wrong: {again.message}" + EVERY_LAUNCH_HINT
            )
            _fill_comparison(result, again)
            return
        result.timing = stats
        for ref in ctx.references:
            ref_stats = _time_reference(ctx, ref, case, expected, host, scalars, flusher)
            if ref_stats is not None:
                result.reference_timings[ref.name] = ref_stats


def _time_reference(
    ctx: Context,
    ref: Kernel,
    case: CaseSpec,
    expected: dict[str, np.ndarray],
    host: dict[str, np.ndarray],
    scalars: dict[str, Any],
    flusher: L2Flusher,
) -> TimingStats | None:
    lab = ctx.lab
    names = lab.sizes_for(case, ref.declarations)
    arrays = DeviceArrays.allocate(lab, names, host)
    try:
        if ref.builtin == "cublas":
            run = _cublas_runner(lab, arrays)
        else:
            plan = LaunchPlan.build(lab, names, arrays, scalars)
            run = lambda: launch_all(ref.func, plan)  # noqa: E731
        stats = time_repetitions(
            run,
            arrays.prepare,
            plan=_timing_plan(lab),
            flusher=flusher,
            launch_timeout_s=lab.limits.case_seconds,
        )
        check = judge(ctx, arrays, expected, names)
        if not check.passed:
            ctx.log.append(f"reference {ref.name} gave a wrong answer when timed: {check.message}")
            return None
        return stats
    except Exception as raw:
        exc = as_failure(raw, lab.limits.case_seconds)
        ctx.log.append(f"reference {ref.name} failed when timed: {exc.message}")
        if exc.sticky:
            raise exc from raw
        return None
    finally:
        arrays.release()


def _cublas_runner(lab: LabSpec, arrays: DeviceArrays) -> Any:
    """cuBLAS (through cupy.matmul) on the lab's first two inputs into its first output."""
    import cupy as cp

    ins = [arrays.arrays[p.name].view for p in lab.params if p.is_array and p.kind == "in"]
    out = next(arrays.arrays[p.name].view for p in lab.params if p.is_output)
    return lambda: cp.matmul(ins[0], ins[1], out=out)


def _load(entry: dict[str, Any], kernel: str) -> Kernel:
    if entry.get("builtin"):
        return Kernel(entry["name"], None, {}, builtin=entry["builtin"])
    cubin = base64.b64decode(entry["cubin_b64"])
    return Kernel(entry["name"], load_kernel(cubin, kernel), dict(entry.get("declarations", {})))


def _load_failure_message(exc: BaseException) -> str:
    if cuda_error_name(exc) == "CUDA_ERROR_OUT_OF_MEMORY" or "out of memory" in str(exc).lower():
        return (
            "The GPU could not load the kernel: it asks for more memory than the GPU has (a very "
            "large __device__ array does this). Make the arrays it declares smaller."
        )
    return f"The GPU could not load the kernel ({exc}); check what it declares at file scope."


def not_run(case: CaseSpec, seed: int, message: str) -> CaseResult:
    return CaseResult(
        name=case.name,
        sizes=dict(case.sizes),
        hidden=case.hidden,
        passed=False,
        verdict="not_run",
        message=message,
        max_points=float(case.points),
        seed=seed,
    )


def _flush_all_output(*, device: bool) -> None:
    """Python's buffers, the device's printf buffer, then C's stdio buffers (the driver writes
    a kernel's printf through C's `stdout`), so every byte so far reaches the current fd 1.
    `device=False` after a failure: a hung kernel would make the synchronize wait forever."""
    sys.stdout.flush()
    sys.stderr.flush()
    if device:
        try:
            import cupy as cp

            cp.cuda.Device().synchronize()  # a synchronize hands the printf buffer over
        except Exception:  # a dead context: whatever it printed is gone with it
            pass
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def withheld_output(case: CaseSpec) -> Iterator[None]:
    """A hidden case's printf output goes nowhere: students see only pass or fail for it, and
    the stdout of a grading is shown to them at once (a kernel could print a hidden case's
    sizes and data). Standard output is pointed at /dev/null while the case runs."""
    if not case.hidden:
        yield
        return
    _flush_all_output(device=True)
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    failed = False
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        _flush_all_output(device=not failed)
        os.dup2(saved, 1)
        os.close(saved)
        print(HIDDEN_OUTPUT_NOTE.format(name=case.name), flush=True)


def run_cases(payload: dict[str, Any]) -> dict[str, Any]:
    """Grade the payload's cases in order; see the module docstring."""
    import cupy as cp

    lab = load_lab(payload["lab_folder"])
    progress = Path(payload["progress_path"]) if payload.get("progress_path") else None
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    seeds: dict[str, int] = payload["seeds"]
    try:
        submission = _load({"name": "submission", **payload["submission"]}, lab.kernel)
    except Exception as exc:  # the driver refused the student's module: their verdict, not ours
        message = _load_failure_message(exc)
        refused = []
        for name in payload["cases"]:
            result = not_run(lab.case(name), seeds[name], message)
            result.verdict = "launch_error"
            refused.append(result.to_dict())
        return {"cases": refused, "stopped": "", "gpu": None, "log": [str(exc)]}
    ctx = Context(
        lab=lab,
        submission=submission,
        references=[_load(r, lab.kernel) for r in payload.get("references", [])],
        lock_dir=payload.get("lock_dir"),
        progress=progress,
        time_cases=bool(payload.get("timing", True)),
        max_shared=int(props.get("sharedMemPerBlock", 0)),
    )
    flusher = L2Flusher() if ctx.time_cases and lab.timing else None
    cases = [lab.case(name) for name in payload["cases"]]
    results: list[CaseResult] = []
    stopped = ""
    for i, case in enumerate(cases):
        ctx.note({"start": case.name, "at": time.time()})
        try:
            with withheld_output(case):
                result = grade_case(ctx, case, seeds[case.name], flusher)
        except KernelFailure as exc:
            result = not_run(case, seeds[case.name], exc.message)
            result.verdict = exc.verdict
            if exc.sticky:
                stopped = exc.verdict
                results.append(result)
                ctx.note({"done": result.to_dict()})
                why = (
                    "it did not finish"
                    if exc.verdict == "timeout"
                    else "its error left the GPU context unusable"
                )
                message = f"Not run in this process: case {case.name} stopped the kernel ({why})."
                for rest in cases[i + 1 :]:
                    results.append(not_run(rest, seeds[rest.name], message))
                break
        results.append(result)
        ctx.note({"done": result.to_dict()})
    _flush_all_output(device=False)  # the child ends with os._exit, which skips C's flush
    return {
        "cases": [r.to_dict() for r in results],
        "stopped": stopped,
        "gpu": ctx.gpu,
        "log": ctx.log,
    }
