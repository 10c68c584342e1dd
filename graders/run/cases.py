"""One correctness case, inside the sandboxed run child: generate, launch, judge, on the device.

Inputs are generated on the GPU from the case's seed (or uploaded, where the case writes them by
hand); outputs start as the sentinel; after the launches the run is judged on the device
(graders.run.judge): guards, inputs made again and compared with what the kernels left, and the
trusted answer computed from those fresh inputs and compared there. Only the comparison's
summary (counts, the first wrong index, expected and got there, the largest errors) comes back
to the host.
"""

from __future__ import annotations

import numpy as np

from graders.results import CaseResult
from graders.run.buffers import DeviceArrays
from graders.run.context import Context, Kernel, load
from graders.run.harness import LaunchPlan, check_launchable, run_and_wait
from graders.run.inputs import scalar_values
from graders.run.judge import Judgement, judge
from graders.spec import CaseSpec

__all__ = [
    "EVERY_LAUNCH_HINT", "Context", "Judgement", "Kernel", "fill_comparison", "grade_case",
    "judge", "load",
]  # fmt: skip

EVERY_LAUNCH_HINT = (
    " A kernel must do its whole work on every launch: the grader gives every launch new "
    "inputs and checks every output, so state kept between launches (a __device__ buffer, a "
    "counter or a flag) makes it wrong."
)


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


def grade_case(ctx: Context, case: CaseSpec, seed: int) -> CaseResult:
    """One case: the kernels' first run on the case's own data, judged on the device."""
    lab = ctx.lab
    result = CaseResult.unjudged(case, seed, verdict="")
    names = lab.sizes_for(case, ctx.submission.declarations)
    arrays = DeviceArrays.allocate(lab, names, literals=case.inputs)
    try:
        arrays.generate(seed)
        scalars = scalar_values(lab.params, names, seed)
        plan = LaunchPlan.build(lab, names, arrays, scalars)
        check_launchable(ctx.submission.funcs, plan, max_shared=ctx.max_shared)
        run_and_wait(ctx.submission.funcs, plan, lab.limits.case_seconds)
        j = judge(ctx, case, arrays, scalars)
    finally:
        arrays.release()
    result.passed, result.verdict, result.message = j.passed, j.verdict, j.message
    fill_comparison(result, j)
    if result.passed:
        result.points = result.max_points
    return result
