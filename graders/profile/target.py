"""The program Nsight Compute profiles: the timed case's launches of one compiled kernel set.

`python -m graders.profile.target JOB RESULT`, started under ncu by graders.profile.child. It
loads the cubin, makes the case's inputs from the grading's seed (as the normal run does, with
no guard bands), and runs the lab's launches once between cudaProfilerStart and
cudaProfilerStop: ncu (`--profile-from-start off`) profiles those launches and nothing else.
It holds the GPU's lock shared throughout, so it never overlaps a timed section. How the
launches ended goes to RESULT as JSON.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path
from typing import Any

from graders.sandbox import lifeline
from graders.sanitizer.target import die_with_parent


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """The case's launches once, inside the profiler's range; a verdict and a sentence."""
    import cupy

    from graders.gpu import gpu_lock
    from graders.run.buffers import DeviceArrays
    from graders.run.harness import LaunchPlan, as_failure, load_kernels, run_and_wait
    from graders.run.inputs import scalar_values
    from graders.run.output import limit_printf
    from graders.spec import load_lab

    lab = load_lab(job["lab_folder"])
    case = lab.case(job["case"])
    names = lab.sizes_for(case, job.get("declarations", {}))
    seed = int(job["seed"])
    timeout = float(job.get("timeout_s", 60))
    with gpu_lock(job.get("lock_dir") or None).shared():
        cupy.cuda.set_allocator(None)
        limit_printf()
        try:
            funcs = load_kernels(base64.b64decode(job["cubin_b64"]), lab.kernels)
            arrays = DeviceArrays.allocate(lab, names, guards=False, literals=case.inputs)
            arrays.generate(seed)
            plan = LaunchPlan.build(lab, names, arrays, scalar_values(lab.params, names, seed))
            cupy.cuda.Device().synchronize()
            cupy.cuda.profiler.start()
            try:
                run_and_wait(funcs, plan, timeout)
            finally:
                cupy.cuda.profiler.stop()
        except Exception as exc:
            failure = as_failure(exc, timeout)
            return {"verdict": failure.verdict, "message": failure.message}
    return {"verdict": "ok", "message": "", "launches": len(plan.steps)}


def main(argv: list[str]) -> int:
    die_with_parent()
    lifeline.hold_inherited()
    job_path, result_path = Path(argv[1]), Path(argv[2])
    outcome = run_job(json.loads(job_path.read_text(encoding="utf-8")))
    result_path.write_text(json.dumps(outcome), encoding="utf-8")
    sys.stdout.flush()
    # A normal exit status tells ncu the program ended well (--check-exit-code).
    return 0 if outcome["verdict"] == "ok" else 3


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    os._exit(code)
