"""The program compute-sanitizer watches: run one case of one submission once, then exit.

`python -m graders.sanitizer.target JOB.json`, started by `graders.sanitizer.run_in_child`.
Arrays get no guard bands and no memory pool here, so every array is its own allocation and
the sanitizer sees an access past an array's end as out of bounds.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    import cupy

    from graders.run.harness import (
        DeviceArrays,
        KernelFailure,
        LaunchPlan,
        load_kernel,
        run_and_wait,
    )
    from graders.run.inputs import generate_arrays, scalar_values
    from graders.spec import load_lab

    job = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    cupy.cuda.set_allocator(None)
    lab = load_lab(job["lab_folder"])
    case = lab.case(job["case"])
    names = lab.sizes_for(case, job.get("declarations", {}))
    seed = int(job["seed"])
    host = generate_arrays(lab.params, names, seed)
    scalars = scalar_values(lab.params, names, seed)
    func = load_kernel(base64.b64decode(job["cubin_b64"]), lab.kernel)
    arrays = DeviceArrays.allocate(lab, names, host, guard=0)
    plan = LaunchPlan.build(lab, names, arrays, scalars)
    for grid, block, shared, _ in plan.steps:
        print(f"kernelgrader: launching {lab.kernel} grid {grid} block {block} shared {shared}")
    try:
        run_and_wait(func, plan, float(job.get("timeout_s", 60)))
    except KernelFailure as exc:
        print(f"kernelgrader: {exc.verdict}: {exc.message}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
