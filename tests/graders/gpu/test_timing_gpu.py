"""Timing on the GPU: a correct kernel is timed against its references; a cheat is caught."""

from __future__ import annotations

from pathlib import Path

import pytest

from graders.grade import grade_source
from graders.spec import load_builtin_lab

SECRET = "kernelgrader-test-secret"
KERNELS = Path(__file__).parent / "kernels"


@pytest.mark.gpu
def test_tiled_reference_is_timed_against_every_reference() -> None:
    lab = load_builtin_lab("matmul-tiled")
    assert lab.timing is not None
    report = grade_source(lab, lab.reference("tiled").source, secret=SECRET, sanitizer=False)
    timed = next(c for c in report.cases if c.name == lab.timing.case)
    assert timed.passed and timed.timing is not None, timed.message
    assert timed.timing.reps >= lab.timing.min_reps
    assert timed.timing.min_ms <= timed.timing.median_ms
    assert set(timed.reference_timings) == {r.name for r in lab.references}
    # The tiled reference is the target: it earns (close to) full performance points.
    assert report.performance_points > 0
    assert report.gpu is not None and report.gpu.name


@pytest.mark.gpu
def test_kernel_that_only_works_on_its_first_launch_is_caught_when_timed() -> None:
    lab = load_builtin_lab("matmul-tiled")
    assert lab.timing is not None
    source = (KERNELS / "first_launch_only.cu").read_text(encoding="utf-8")
    # The lab requires shared memory; the cheat's `__shared__ int seen` satisfies that.
    report = grade_source(lab, source, secret=SECRET, sanitizer=False)
    timed = next(c for c in report.cases if c.name == lab.timing.case)
    others = [c for c in report.cases if c.name != lab.timing.case]
    assert all(c.passed for c in others), [(c.name, c.message) for c in others if not c.passed]
    assert not timed.passed
    assert "last timed launch" in timed.message
    assert timed.timing is None
    assert report.performance_points == 0
