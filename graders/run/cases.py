"""One correctness case, inside the sandboxed run child: generate, launch, judge, on the device.

Inputs are generated on the GPU from the case's seed; outputs start as the sentinel; after the
launch the guards are checked, the inputs are made again and compared with what the kernel
left, and the expected answer is computed in float64 from those fresh inputs and compared
there. Only the comparison's summary (counts, the first wrong index, expected and got there,
the largest errors) comes back to the host.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graders.results import CaseResult
from graders.run import compare, oracles
from graders.run.buffers import DeviceArrays
from graders.run.harness import LaunchPlan, check_launchable, load_kernel, run_and_wait
from graders.run.inputs import DTYPES, scalar_values
from graders.spec import CaseSpec, LabSpec

DEFAULT_TOLERANCE = (1e-5, 1e-5)
EVERY_LAUNCH_HINT = (
    " A kernel must do its whole work on every launch: the grader gives every launch new "
    "inputs and checks every output, so state kept between launches (a __device__ buffer, a "
    "counter or a flag) makes it wrong."
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
    references: dict[str, Kernel]
    max_shared: int
    log: list[str] = field(default_factory=list)


@dataclass
class Judgement:
    passed: bool
    verdict: str
    message: str
    comparison: compare.Comparison | None = None


def load(entry: dict[str, Any], kernel: str) -> Kernel:
    if entry.get("builtin"):
        return Kernel(entry["name"], None, {}, builtin=entry["builtin"])
    cubin = base64.b64decode(entry["cubin_b64"])
    return Kernel(entry["name"], load_kernel(cubin, kernel), dict(entry.get("declarations", {})))


def _tolerance(lab: LabSpec, dtype: str, names: dict[str, Any]) -> tuple[float, float]:
    if dtype not in ("float32", "float64"):
        return 0.0, 0.0
    spec = lab.tolerance.get(dtype)
    return spec.for_case(names) if spec else DEFAULT_TOLERANCE


def _reference_outputs(
    ctx: Context, case: CaseSpec, arrays: DeviceArrays, scalars: dict[str, Any]
) -> dict[str, Any]:
    """The expected outputs from a reference kernel run on the same inputs, made again."""
    lab = ctx.lab
    ref = ctx.references[lab.expected_oracle.split(":", 1)[1]]
    names = lab.sizes_for(case, ref.declarations)
    theirs = DeviceArrays.allocate(lab, names, guards=False)
    try:
        theirs.fill_from(arrays.keys)
        plan = LaunchPlan.build(lab, names, theirs, scalars)
        run_and_wait(ref.func, plan, lab.limits.case_seconds)
        out = {}
        for p in lab.params:
            if p.is_output:
                view = theirs.arrays[p.name].view
                wide = np.int64 if np.issubdtype(view.dtype, np.integer) else np.float64
                out[p.name] = view.astype(wide)
        return out
    finally:
        for arr in theirs.arrays.values():
            arr.raw.fill(0)
        theirs.release()


def expected_outputs(
    ctx: Context, case: CaseSpec, arrays: DeviceArrays, scalars: dict[str, Any]
) -> dict[str, Any]:
    """The trusted answer of each output, on the device; computed after the student's run."""
    lab = ctx.lab
    if lab.expected_oracle.startswith("reference:"):
        return _reference_outputs(ctx, case, arrays, scalars)
    ins = [arrays.fresh_input(p.name) for p in lab.params if p.is_array and p.is_input]
    floats = [
        float(scalars[p.name])
        for p in lab.params
        if p.kind == "scalar" and p.dtype in ("float32", "float64")
    ]
    first = next(p for p in lab.params if p.is_output)
    try:
        answer = oracles.compute(
            lab.expected_oracle,
            ins,
            floats,
            first.shape_for(arrays.names),
            np.dtype(DTYPES[first.dtype]),
        )
    finally:
        for arr in ins:
            arr.fill(0)
    return {first.name: answer}


def judge(
    ctx: Context,
    case: CaseSpec,
    arrays: DeviceArrays,
    scalars: dict[str, Any],
    *,
    check_inputs: bool = True,
) -> Judgement:
    """Guards first (a write past the end is never a pass), then inputs, then the outputs."""
    lab = ctx.lab
    guards = arrays.guard_violations()
    if guards:
        return Judgement(False, "out_of_bounds_write", " ".join(guards))
    if check_inputs:
        modified = arrays.modified_inputs()
        if modified:
            return Judgement(
                False,
                "input_modified",
                f"The kernel changed its input {', '.join(modified)}; inputs are read-only "
                "(the grader checks them after the run).",
            )
    expected = expected_outputs(ctx, case, arrays, scalars)
    try:
        return _compare_outputs(lab, arrays, expected)
    finally:
        for answer in expected.values():
            answer.fill(0)  # no answer stays in device memory for a later kernel to find


def _compare_outputs(lab: LabSpec, arrays: DeviceArrays, expected: dict) -> Judgement:
    last: Judgement | None = None
    for param in lab.params:
        if not param.is_output or param.name not in expected:
            continue
        got = arrays.arrays[param.name].view
        want = expected[param.name]
        atol, rtol = _tolerance(lab, param.dtype, arrays.names)
        if param.check == "sum":
            total = float(want.reshape(-1)[0])
            cmp = compare.compare_sum(got, total, atol=atol, rtol=rtol)
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


def fill_comparison(result: CaseResult, j: Judgement) -> None:
    cmp = j.comparison
    if cmp is None:
        return
    result.wrong_count = cmp.wrong_count
    result.first_wrong_index = list(cmp.first_wrong_index) if cmp.first_wrong_index else None
    result.expected = _finite(cmp.expected)
    result.got = _finite(cmp.got)
    result.max_abs_error = _finite(cmp.max_abs_error)
    result.max_rel_error = _finite(cmp.max_rel_error)


def new_result(case: CaseSpec, seed: int, verdict: str = "", message: str = "") -> CaseResult:
    return CaseResult(
        name=case.name,
        sizes=dict(case.sizes),
        hidden=case.hidden,
        passed=False,
        verdict=verdict,
        message=message,
        max_points=float(case.points),
        seed=seed,
    )


def not_run(case: CaseSpec, seed: int, message: str) -> CaseResult:
    return new_result(case, seed, "not_run", message)


def grade_case(ctx: Context, case: CaseSpec, seed: int) -> CaseResult:
    """One case: the kernel's first launch on the case's own data, judged on the device."""
    lab = ctx.lab
    result = new_result(case, seed)
    names = lab.sizes_for(case, ctx.submission.declarations)
    arrays = DeviceArrays.allocate(lab, names)
    try:
        arrays.generate(seed)
        scalars = scalar_values(lab.params, names, seed)
        plan = LaunchPlan.build(lab, names, arrays, scalars)
        check_launchable(ctx.submission.func, plan, max_shared=ctx.max_shared)
        run_and_wait(ctx.submission.func, plan, lab.limits.case_seconds)
        j = judge(ctx, case, arrays, scalars)
    finally:
        arrays.release()
    result.passed, result.verdict, result.message = j.passed, j.verdict, j.message
    fill_comparison(result, j)
    if result.passed:
        result.points = result.max_points
    return result
