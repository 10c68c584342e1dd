"""The program compute-sanitizer watches: ready ahead of need, then one case of one submission.

`python -m graders.sanitizer.target FIFO READY RESULT HELD`, started under compute-sanitizer by
graders.sanitizer.child. It imports CuPy and makes the context, then says it is ready (the file
READY) and blocks on FIFO until the job comes: the submission's cubin and the case.

The steps that show on the GPU hold the GPU's lock (shared, so a timed section never overlaps
them): making the context (NVML counts a new context's process among those using the SMs for
about two seconds, and a timed kernel beside it was lengthened by up to 21 %, both measured on
an H100), and the job's copies and launch. No kernel of the grader's runs under the tool: the
job's inputs are made on the host by the generator's NumPy twin (graders.run.inputs.
generate_arrays, the same bits the device makes) and copied, and the outputs' sentinel too, so
the tool instruments the student's kernels alone (it instruments a kernel at its first launch,
under the lock; the generator's took 0.2 to 0.8 s of holds in every spare before). Loading a
module and the program's end (its context torn down, the tool's report written) show nothing in
NVML's per-process SM samples (graders.timing.contention) and hold nothing, as a run child's end
holds nothing; a context torn down beside a timed kernel lengthened 19 of 4540 repetitions by
more than 1 % on the H100, which the median of a timed section absorbs.
Once the job's program holds the lock it says so (the file HELD): the child's clock for the
tools starts then, not while it waited.

It runs that case once on the same inputs as the normal run (same seed), each array
an allocation of its own laid out as a graded run lays it out (graders/run/layout.py), without the
guard bands: the tools' padding stands where the guards stand in a graded run, so the arrays lie as
far apart as there and an access past an array's end is out of bounds, by line. It writes how the
launch ended to RESULT.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import resource
import signal
import sys
from pathlib import Path
from typing import Any

from graders.run.marks import Marks
from graders.sandbox import lifeline
from graders.timing.lock import GpuLock

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """SIGKILL when the parent (compute-sanitizer, or the sanitizer child) goes away."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _lock() -> GpuLock:
    """The GPU's lock, named by the environment every GPU child and its tools get
    (graders.sandbox.isolation; graders.gpu reads it): the warm-up and the job take the same
    one."""
    from graders.gpu import gpu_lock

    return gpu_lock()


def _warm() -> None:
    """CuPy and its context (under the lock: making a context shows on the GPU), and the
    modules the job uses, imported. No kernel of the grader's runs here or in the job: the
    job's data is made on the host and copied (`run_job`), so the tool instruments the
    student's kernels alone."""
    import cupy

    from graders.run import buffers, harness, inputs  # noqa: F401
    from graders.run.output import limit_printf
    from graders.spec import load_lab  # noqa: F401

    with _lock().shared():
        cupy.cuda.set_allocator(None)
        limit_printf()  # makes the context


def run_job(job: dict[str, Any], held: Path | None = None) -> dict[str, Any]:
    """Launch the job's case once; how it ended, as a verdict and a sentence. `held` is
    touched once the GPU's lock is held for the launch."""
    from graders.run.buffers import DeviceArrays
    from graders.run.harness import (
        KernelFailure,
        LaunchPlan,
        as_failure,
        load_kernels,
        run_and_wait,
    )
    from graders.run.inputs import generate_arrays, scalar_values
    from graders.spec import load_lab

    marks = Marks()
    lab = load_lab(job["lab_folder"])
    case = lab.case(job["case"])
    names = lab.sizes_for(case, job.get("declarations", {}))
    seed = int(job["seed"])
    try:
        funcs = load_kernels(base64.b64decode(job["cubin_b64"]), lab.kernels)
        arrays = DeviceArrays.allocate(lab, names, guards=False, literals=case.inputs)
        data = generate_arrays(lab.params, names, seed, literals=case.inputs)
        marks.mark("load_s")
        with _lock().shared():
            marks.mark("wait_s")
            if held is not None:
                held.touch()
            arrays.fill_from(data, copies_only=True)
            plan = LaunchPlan.build(lab, names, arrays, scalar_values(lab.params, names, seed))
            run_and_wait(funcs, plan, float(job.get("timeout_s", 60)))
            marks.mark("held_s")
    except KernelFailure as exc:
        return {"verdict": exc.verdict, "message": exc.message, **marks.seconds}
    except Exception as exc:
        failure = as_failure(exc, float(job.get("timeout_s", 60)))
        return {"verdict": failure.verdict, "message": failure.message, **marks.seconds}
    return {"verdict": "ok", "message": "", **marks.seconds}


def main(argv: list[str]) -> int:
    die_with_parent()
    lifeline.hold_inherited()
    fifo, ready, result, held = (Path(a) for a in argv[1:5])
    _warm()
    ready.touch()
    with fifo.open("rb") as f:
        data = f.read()
    if not data:
        os._exit(0)
    outcome = run_job(json.loads(data), held)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    outcome["cpu_s"] = round(usage.ru_utime + usage.ru_stime, 3)  # for the child's count
    result.write_text(json.dumps(outcome), encoding="utf-8")
    # A normal exit, not os._exit: the tools finish their reports as the program ends.
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
