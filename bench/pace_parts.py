"""Where one grading's seconds go, part by part, without the service around it.

Prints, for one lab (default matmul-tiled, its scoring target as the submission):

- `warm`: a fresh run child's warm-up split into importing CuPy, making the context and the
  grader's kernels (graders.run.child.warm_up); and how long the sanitizer's three tools take
  to say ready, started together (graders.sanitizer.child.warm_up);
- `compile`: compile_submission with a prestarted compile child, per call;
- `section`: the run child's work (every case, then the timed section) called in this process,
  twice (the second reuses the reference figures the first measured, as a worker would), with
  the child's own log lines and the functions that took the most time in the second call;
- `cache`: `section` again in a fresh process on a private copy of the built kernel cache, as
  a run child has it, and the names of the kernels it still had to compile;
- `sanitizer`: the sanitizer stage with a prestarted child, per call.

    python bench/pace_parts.py [--lab matmul-tiled] [--parts warm,compile,section,sanitizer]
                               [--repeats 3] [--top 30]

Needs a GPU. Numbers are printed, never asserted.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The repository instead of bench/ first on the path: bench/profile.py would shadow the
# standard library's `profile`, which cProfile imports.
sys.path[0] = str(ROOT)

import argparse  # noqa: E402
import cProfile  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import pstats  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

SECRET = "bench-secret"

_WARM_CHILD = """
import json, time
t0 = time.perf_counter()
import cupy as cp
t1 = time.perf_counter()
cp.cuda.Device().use(); cp.cuda.runtime.free(cp.cuda.runtime.malloc(1))
t2 = time.perf_counter()
from graders.run.child import warm_up
from graders.run import warmup
from graders.timing.lock import GpuLock
import graders.gpu as g
steps = warmup.steps(list(warmup.AHEAD), fused=True)
t3 = time.perf_counter()
for s in steps:
    s(); cp.cuda.Device().synchronize()
t4 = time.perf_counter()
print(json.dumps({"import_cupy": t1 - t0, "context": t2 - t1, "import_graders": t3 - t2,
                  "kernels": t4 - t3, "steps": len(steps)}))
"""


_SANITIZED = """
import json, sys, time
t0 = time.perf_counter()
import cupy
t1 = time.perf_counter()
cupy.cuda.set_allocator(None)
cupy.cuda.runtime.free(cupy.cuda.runtime.malloc(1))
t2 = time.perf_counter()
from graders.run.generate import device_fill
from graders.run.host_dtypes import host_dtype
from graders.spec.dtypes import ARRAY_DTYPES
each = {}
for dtype in ARRAY_DTYPES:
    t = time.perf_counter()
    scratch = cupy.empty(4, dtype=host_dtype(dtype))
    for init in ({"dist": "uniform", "low": 0, "high": 1},
                 {"dist": "integers", "low": 0, "high": 1},
                 {"dist": "normal", "mean": 0, "std": 1}):
        device_fill(scratch, init, {}, 1, dtype=dtype)
    cupy.cuda.Device().synchronize()
    each[dtype] = round(time.perf_counter() - t, 3)
t3 = time.perf_counter()
sys.stderr.write("TIMES " + json.dumps({"import_cupy": t1 - t0, "context": t2 - t1,
                 "fills": t3 - t2, "each": each}) + "\\n")
"""


def _warm(repeats: int) -> None:
    from graders.sanitizer import child as sanitizer_child
    from graders.sanitizer.tool import executable

    tool = executable()
    for name in ("memcheck", "racecheck"):
        began = time.perf_counter()
        out = subprocess.run(
            [tool or "compute-sanitizer", "--tool", name, sys.executable, "-c", _SANITIZED],
            capture_output=True, text=True, cwd=ROOT,
        )  # fmt: skip
        said = [line for line in out.stderr.splitlines() if line.startswith("TIMES")]
        wall = time.perf_counter() - began
        print(f"  under {name}: wall {wall:.2f} s {said[-1] if said else out.stdout[-400:]}")

    for i in range(repeats):
        began = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", _WARM_CHILD], capture_output=True, text=True, cwd=ROOT
        )
        parts = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {}
        wall = time.perf_counter() - began
        said = ", ".join(
            f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in parts.items()
        )
        print(f"  run child warm-up {i + 1}: wall {wall:.2f} s ({said}) {out.stderr[-300:]}")
    for i in range(repeats):
        here = os.getcwd()
        folder = tempfile.mkdtemp(prefix="kg-pace-")
        os.chdir(folder)
        try:
            began = time.perf_counter()
            sanitizer_child._TOOLS.clear()
            sanitizer_child.warm_up()
            ready = time.perf_counter() - began
            for tool in sanitizer_child._TOOLS:
                tool.kill()
                tool.proc.wait()
            sanitizer_child._TOOLS.clear()
            print(f"  sanitizer tools ready {i + 1}: {ready:.2f} s")
        finally:
            os.chdir(here)


def _compile(lab, source: str, repeats: int) -> None:
    from graders.compile.compiler import compile_submission
    from graders.sandbox import prestart

    prestart.configure(
        prestart.PoolSpec("compile", gpu=False, warm="graders.compile.warm:load_nvrtc", spares=1)
    )
    time.sleep(3)
    for i in range(repeats):
        began = time.perf_counter()
        result = compile_submission(lab, source, line_info=True)
        print(f"  compile {i + 1}: {time.perf_counter() - began:.3f} s (ok {result.ok})")
        time.sleep(1.5)


def _payload(lab, compiled, *, cached):
    from graders.run.inputs import case_seeds
    from graders.run.references import needed_references, reference_payloads
    from graders.run.stage import _payload as build
    from graders.run.stage import case_order

    seeds = case_seeds(lab, SECRET)
    refs = reference_payloads(lab, compiled.arch or None, needed_references(lab, True))
    return build(
        lab, compiled, refs, case_order(lab), seeds, timing=True, nonce=12345, cached=cached
    )


def _section(lab, source: str, top: int) -> None:
    from graders.grade import _compile
    from graders.run import child

    # A hidden case sends this process's stdout nowhere from then on (graders.run.output):
    # these figures go to a copy of it taken now.
    out = os.fdopen(os.dup(1), "w", buffering=1)

    def say(text: str) -> None:
        print(text, file=out)

    compiled = _compile(lab, source, line_info=True)
    began = time.perf_counter()
    child.warm_up()
    say(f"  warm-up in this process: {time.perf_counter() - began:.2f} s")
    cached: dict = {}
    for i in range(3):
        child._hidden_seen = False  # each call stands for a fresh child
        payload = _payload(lab, compiled, cached=cached)
        prof = cProfile.Profile() if i == 2 else None
        began = time.perf_counter()
        if prof is not None:
            prof.enable()
        value = child.run_in_child(payload)
        if prof is not None:
            prof.disable()
        wall = time.perf_counter() - began
        cached = value.get("measured_references") or cached
        say(f"  run_in_child {i + 1}: {wall:.3f} s")
        for line in value.get("log", []):
            say(f"    {line}")
        if prof is not None:
            for key in ("tottime", "cumulative") if top else ():
                text = io.StringIO()
                pstats.Stats(prof, stream=text).sort_stats(key).print_stats(top)
                say(f"  -- by {key}:")
                say("\n".join(text.getvalue().splitlines()[6:]))
    # Standard output back where it was, for the parts after this one.
    sys.stdout.flush()
    os.dup2(out.fileno(), 1)


def _cache(lab_id: str) -> None:
    """The section part in a fresh process on a private copy of the built kernel cache, as a
    run child has it; then the kernels it had to compile (their names, from the sources CuPy
    saves beside them with CUPY_CACHE_SAVE_CUDA_SOURCE)."""
    from graders.run.kernel_cache import ensure_built

    state = ensure_built()
    if state.folder is None:
        print(f"  no kernel cache: {state.why_not}")
        return
    folder = Path(tempfile.mkdtemp(prefix="kg-pace-cache-")) / "cache"
    shutil.copytree(state.folder, folder)
    before = set(os.listdir(folder))
    env = {**os.environ, "CUPY_CACHE_DIR": str(folder), "CUPY_CACHE_SAVE_CUDA_SOURCE": "1"}
    out = subprocess.run(
        [sys.executable, __file__, "--lab", lab_id, "--parts", "section", "--top", "0"],
        capture_output=True, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    print("\n".join("  | " + line for line in out.stdout.splitlines() if line.strip()))
    new = sorted(set(os.listdir(folder)) - before)
    print(f"  {len(new)} files new in the cache copy")
    for name in new:
        if name.endswith(".cu"):
            text = (folder / name).read_text(errors="replace")
            kernels = re.findall(r"__global__\s+void\s+(\w+)", text)
            print(f"    {name}: {kernels[:4]} {text[:160]!r}")
    shutil.rmtree(folder.parent, ignore_errors=True)


def _sanitizer(lab, source: str, repeats: int) -> None:
    from graders.grade import _compile
    from graders.results import CaseResult, GradeReport
    from graders.run.budget import GpuBudget
    from graders.run.inputs import case_seeds
    from graders.sandbox import prestart
    from graders.sanitizer.stage import run_sanitizer

    compiled = _compile(lab, source, line_info=True)
    prestart.configure(
        prestart.PoolSpec("sanitizer", gpu=True, warm="graders.sanitizer.child:warm_up", spares=1)
    )
    seeds = case_seeds(lab, SECRET)
    time.sleep(8)
    for i in range(repeats):
        report = GradeReport(lab=lab.id, cases=[], score=0.0, max_score=lab.max_score)
        report.cases = [CaseResult.unjudged(c, seeds[c.name], "") for c in lab.cases]
        for c in report.cases:
            c.verdict, c.passed = "pass", True
        began = time.perf_counter()
        note = run_sanitizer(lab, compiled, seeds, report, GpuBudget(lab.limits.gpu_seconds))
        print(f"  sanitizer {i + 1}: {time.perf_counter() - began:.3f} s {note}")
        time.sleep(8)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lab", default="matmul-tiled")
    ap.add_argument("--parts", default="warm,compile,section,sanitizer")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    from graders.spec import load_builtin_lab

    lab = load_builtin_lab(args.lab)
    name = lab.scoring.target or next(r.name for r in lab.references if r.file)
    source = lab.reference(name).source
    for part in args.parts.split(","):
        print(f"== {part} ({args.lab}, submission: its {name} reference)", flush=True)
        began = time.perf_counter()
        if part == "warm":
            _warm(args.repeats)
        elif part == "compile":
            _compile(lab, source, args.repeats)
        elif part == "section":
            _section(lab, source, args.top)
        elif part == "cache":
            _cache(args.lab)
        elif part == "sanitizer":
            _sanitizer(lab, source, args.repeats)
        print(f"   ({part}: {time.perf_counter() - began:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
