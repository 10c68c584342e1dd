"""Timings that can be trusted on a shared GPU: work outside the lock is noticed and its figure
never kept, a kept reference that no longer matches is timed again in the same run, a median
under the physics floor gets no points, and a case that ran out of memory beside another grading
runs again alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graders.compile.compiler import compile_submission
from graders.grade import grade_source
from graders.results import GradeReport
from graders.run.inputs import case_seed
from graders.spec import load_builtin_lab
from tests.security.lab_copies import lab_copy

SECRET = "timing-trust-tests"
ROOT = Path(__file__).resolve().parents[3]

SPINNER = r"""
import sys, time, cupy
k = cupy.RawKernel(r'''extern "C" __global__ void spin(long long c)
{ long long s = clock64(); while (clock64() - s < c) {} }''', "spin")
print("spinning", flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    k((132 * 4,), (128,), (cupy.int64(20_000_000),))
    cupy.cuda.Device().synchronize()
"""

HOG = r"""
import os, sys, time, cupy
from graders.gpu import gpu_lock
leave = int(sys.argv[1]); hold = float(sys.argv[2])
with gpu_lock().shared():
    free, total = cupy.cuda.runtime.memGetInfo()
    block = cupy.empty(max(0, free - leave), dtype=cupy.uint8)
    print("holding", free - leave, flush=True)
    time.sleep(hold)
    del block
"""


def _small_matmul(tmp_path: Path):  # noqa: ANN202
    return lab_copy(
        "matmul-tiled",
        tmp_path,
        cases=[
            {"name": "square-64", "sizes": {"M": 64, "N": 64, "K": 64}},
            {"name": "square-512", "sizes": {"M": 512, "N": 512, "K": 512}},
        ],
        timed="square-512",
        settings={"budget_seconds": "0.5", "max_reps": "60", "sanitizer": "false"},
    )


def _start(script: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # it is busy (or holding) from here on
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)


def _timed(report: GradeReport, name: str):  # noqa: ANN202
    return next(c for c in report.cases if c.name == name)


@pytest.mark.gpu
def test_a_busy_process_outside_the_lock_is_noticed_and_its_figures_not_kept(
    tmp_path: Path,
) -> None:
    lab = _small_matmul(tmp_path)
    spinner = _start(SPINNER, "120")
    try:
        report = grade_source(lab, lab.reference("tiled").source, secret=SECRET, sanitizer=False)
    finally:
        _stop(spinner)
    assert all(c.passed for c in report.cases)
    assert f"pid {spinner.pid}" in report.timing_contended, report.timing_contended
    assert report.performance_pending and report.performance_points == 0
    assert report.measured_references == {}, "a figure taken under contention is never kept"
    assert any("held back" in f for f in report.flags)
    assert "pending" in report.summary

    quiet = grade_source(lab, lab.reference("tiled").source, secret=SECRET, sanitizer=False)
    assert not quiet.timing_contended and not quiet.performance_pending
    assert set(quiet.measured_references) == {r.name for r in lab.references}


@pytest.mark.gpu
def test_a_kept_reference_that_is_off_is_timed_again_in_the_same_run() -> None:
    lab = load_builtin_lab("matmul-tiled")
    assert lab.timing is not None
    source = lab.reference("tiled").source
    first = grade_source(lab, source, secret=SECRET, sanitizer=False)
    kept = {k: v.to_dict() for k, v in first.measured_references.items()}
    assert set(kept) == {"naive", "tiled", "cublas"}
    honest_naive = kept["naive"]["median_ms"]
    kept["naive"] = {**kept["naive"], "median_ms": 3 * honest_naive}  # as if timed under load
    second = grade_source(lab, source, secret=SECRET, sanitizer=False, cached_references=kept)
    refs = _timed(second, lab.timing.case).reference_timings
    seen = {n: (t.reused, t.median_ms, t.check_median_ms) for n, t in refs.items()}
    assert "naive" in second.measured_references, seen
    assert not refs["naive"].reused
    assert refs["naive"].median_ms == pytest.approx(honest_naive, rel=0.02), seen
    # The tiled reference (1.9 ms a launch, steady) still stands, confirmed beside the
    # submission; the ratio of the submission (the same kernel) to it is 1 within its spread.
    assert refs["tiled"].reused and refs["tiled"].check_reps >= 4, seen
    assert refs["tiled"].ratio == pytest.approx(1.0, abs=0.02)
    assert refs["tiled"].ratio_spread is not None and refs["tiled"].ratio_spread < 0.02
    assert second.performance_points == pytest.approx(first.performance_points, abs=1)


@pytest.mark.gpu
def test_a_median_under_the_physics_floor_gets_no_points_and_a_flag(tmp_path: Path) -> None:
    # The lab claims each run moves a petabyte: no honest median can be that fast.
    lab = lab_copy(
        "matmul-tiled",
        tmp_path,
        cases=[{"name": "square-256", "sizes": {"M": 256, "N": 256, "K": 256}}],
        timed="square-256",
        settings={"budget_seconds": "0.3", "sanitizer": "false"},
        work={"bytes": "1000000000000000"},
    )
    report = grade_source(lab, lab.reference("tiled").source, secret=SECRET, sanitizer=False)
    assert all(c.passed for c in report.cases)
    assert report.performance_points == 0
    assert any("physics floor" in f for f in report.flags), report.flags
    assert "cannot be right" in report.summary


@pytest.mark.gpu
def test_out_of_memory_beside_another_grading_runs_again_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graders.results import GradeReport
    from graders.run.stage import run_cases

    monkeypatch.setenv("KERNELGRADER_LOCK_DIR", str(tmp_path / "locks"))
    lab = load_builtin_lab("vector-scale")
    big = lab.case("n-67108864")
    lab = lab_copy(
        "vector-scale",
        tmp_path,
        cases=[{"name": big.name, "sizes": dict(big.sizes)}],
        settings={"sanitizer": "false"},
    )
    compiled = compile_submission(lab, lab.reference("grid-stride").source)
    seeds = {big.name: case_seed(lab.id, big.name, hidden=False, secret=SECRET)}
    # Another grading holds all but 1.5 GiB for 8 s: room for a context, not for this case.
    hog = _start(HOG, str(3 << 29), "8")
    try:
        report = GradeReport(lab=lab.id, cases=[], score=0.0, max_score=lab.max_score)
        began = time.monotonic()
        cases = run_cases(lab, compiled, seeds, report, timing=False)
        print(f"graded in {time.monotonic() - began:.1f} s: {report.stdout[-400:]}")
    finally:
        _stop(hog)
    assert all(c.passed for c in cases), [(c.verdict, c.message) for c in cases]
    assert "ran out of memory beside other gradings" in report.stdout
