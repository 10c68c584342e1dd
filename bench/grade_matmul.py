"""Grade the matmul labs' references and print how long grading takes and how stable timing is.

Per lab: one reference (the scoring target, else the first file reference) is graded REPEATS
times end to end (compile, run stage in the sandboxed child, and the sanitizer on the first
grading only). Printed: the mean seconds of each stage, and the median kernel time of the
timed case over the gradings with its spread ((max - min) / median), plus the references'.

    python bench/grade_matmul.py [--repeats 5] [--labs matmul-tiled,matmul-naive] [--json OUT]

Needs a GPU. Reference compiles are cached per process, as in a long-running worker.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from graders.grade import grade_source  # noqa: E402
from graders.spec import list_builtin_labs, load_builtin_lab  # noqa: E402

SECRET = "bench-secret"


def _spread(values: list[float]) -> dict[str, float]:
    med = statistics.median(values)
    return {
        "median_ms": med,
        "min_ms": min(values),
        "max_ms": max(values),
        "spread_pct": 100.0 * (max(values) - min(values)) / med if med else 0.0,
    }


def bench_lab(lab_id: str, repeats: int) -> dict[str, Any]:
    lab = load_builtin_lab(lab_id)
    name = lab.scoring.target or next(r.name for r in lab.references if r.file)
    ref = lab.reference(name)
    if not ref.file:
        name = next(r.name for r in lab.references if r.file)
        ref = lab.reference(name)
    stages: dict[str, list[float]] = {}
    totals: list[float] = []
    medians: list[float] = []
    ref_medians: dict[str, list[float]] = {}
    reps: list[int] = []
    failures: list[str] = []
    gpu = None
    for i in range(repeats):
        began = time.monotonic()
        report = grade_source(lab, ref.source, secret=SECRET, sanitizer=(i == 0 and lab.sanitizer))
        totals.append(time.monotonic() - began)
        for stage, seconds in report.stage_seconds.items():
            stages.setdefault(stage, []).append(seconds)
        failures += [f"{c.name}: {c.message}" for c in report.cases if not c.passed]
        timed = next((c for c in report.cases if c.timing is not None), None)
        if timed and timed.timing:
            medians.append(timed.timing.median_ms)
            reps.append(timed.timing.reps)
            for rname, stats in timed.reference_timings.items():
                ref_medians.setdefault(rname, []).append(stats.median_ms)
        gpu = report.gpu
    return {
        "lab": lab_id,
        "submission": f"{name} ({ref.file})",
        "timed_case": lab.timing.case if lab.timing else None,
        "gradings": repeats,
        "end_to_end_s": {"mean": statistics.fmean(totals), "max": max(totals)},
        "stage_mean_s": {k: statistics.fmean(v) for k, v in stages.items()},
        "sanitizer_s_first_grading": stages.get("sanitizer", [None])[0],
        "submission_median": _spread(medians) if medians else None,
        "reps": reps,
        "references_median": {k: _spread(v) for k, v in ref_medians.items()},
        "failures": failures[:5],
        "gpu": gpu.to_dict() if gpu else None,
    }


def _print(result: dict[str, Any]) -> None:
    print(f"\n== {result['lab']}: grading {result['submission']} x{result['gradings']}")
    e2e = result["end_to_end_s"]
    stages = ", ".join(f"{k} {v:.2f} s" for k, v in result["stage_mean_s"].items())
    print(
        f"   end to end: mean {e2e['mean']:.2f} s, max {e2e['max']:.2f} s; stages (mean): {stages}"
    )
    if result["sanitizer_s_first_grading"] is not None:
        print(f"   sanitizer (first grading only): {result['sanitizer_s_first_grading']:.2f} s")
    sub = result["submission_median"]
    if sub:
        print(
            f"   median kernel time on {result['timed_case']}: {sub['median_ms']:.4f} ms "
            f"(min {sub['min_ms']:.4f}, max {sub['max_ms']:.4f}, spread {sub['spread_pct']:.2f} %)"
            f"; reps per grading {result['reps']}"
        )
    for name, s in result["references_median"].items():
        print(f"   reference {name:>8}: {s['median_ms']:.4f} ms (spread {s['spread_pct']:.2f} %)")
    if result["failures"]:
        print(f"   FAILURES: {result['failures']}")
    if result["gpu"]:
        g = result["gpu"]
        print(
            f"   gpu: {g['name']} ({g['arch']}), SM clock {g['sm_clock_mhz']}/"
            f"{g['max_sm_clock_mhz']} MHz, {g['temperature_c']} C"
        )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--labs", default="", help="comma-separated lab ids (default: matmul*)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    labs = [x for x in args.labs.split(",") if x] or [
        lab for lab in list_builtin_labs() if lab.startswith("matmul")
    ]
    results = []
    for lab_id in labs:
        result = bench_lab(lab_id, args.repeats)
        _print(result)
        sys.stdout.flush()
        results.append(result)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
