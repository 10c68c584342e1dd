"""A submission may take the lab's GPU time in all; past it the grading ends with a verdict that
names the budget. Kernel: tests/security/kernels/spins_near_every_case_limit.cu."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from graders.grade import grade_source
from tests.security.hostile import KERNELS_DIR
from tests.security.lab_copies import lab_copy

SECRET = "budget-tests"


@pytest.mark.gpu
def test_a_kernel_that_runs_every_case_near_its_limit_is_stopped_at_the_budget(
    tmp_path: Path,
) -> None:
    lab = lab_copy(
        "vector-scale",
        tmp_path,
        cases=[{"name": f"n-{n}", "sizes": {"n": n}} for n in (1000, 1001, 1002, 1003, 1004, 1005)],
        timed="n-1005",
        settings={"case_seconds": "4", "gpu_seconds": "8", "sanitizer": "false"},
    )
    source = (KERNELS_DIR / "spins_near_every_case_limit.cu").read_text(encoding="utf-8")
    began = time.monotonic()
    report = grade_source(lab, source, secret=SECRET, timing=True, sanitizer=False)
    took = time.monotonic() - began
    print(f"graded in {took:.1f} s; {[c.verdict for c in report.cases]}")
    assert report.budget_spent
    stopped = [c for c in report.cases if c.verdict == "timeout"]
    assert stopped and "GPU time" in stopped[0].message and "8 s" in stopped[0].message
    assert any(c.verdict == "not_run" and "GPU time" in c.message for c in report.cases)
    assert sum(c.passed for c in report.cases) < len(report.cases)
    assert report.performance_points == 0
    assert "GPU time of 8 s" in report.summary
