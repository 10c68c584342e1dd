"""A kernel whose local-memory frame the driver would reserve for every resident thread beyond
the lab's GPU-memory limit is refused before its first launch (graders.run.stack)."""

from __future__ import annotations

import pytest

from graders.grade import grade_source
from graders.spec import load_builtin_lab
from tests.security.hostile import KERNELS_DIR

SECRET = "stack-gpu-tests"


@pytest.mark.gpu
def test_a_128_kib_frame_is_refused_with_its_sizes_before_any_launch() -> None:
    lab = load_builtin_lab("matmul-naive")
    source = (KERNELS_DIR / "local_frame_128k.cu").read_text(encoding="utf-8")
    report = grade_source(lab, source, secret=SECRET, sanitizer=False, timing=False)
    print(report.cases[0].message)
    assert {c.verdict for c in report.cases} == {"launch_error"}
    message = report.cases[0].message
    assert "128 KiB of local memory per thread" in message and "GiB" in message
    assert report.error == "" and report.score == 0


@pytest.mark.gpu
def test_a_kernel_with_a_small_frame_still_runs() -> None:
    lab = load_builtin_lab("matmul-naive")
    source = (KERNELS_DIR / "local_frame_128k.cu").read_text(encoding="utf-8")
    small = source.replace("32768", "64")  # 256 bytes a thread: about 66 MiB on an H200
    report = grade_source(lab, small, secret=SECRET, sanitizer=False, timing=False)
    assert all(c.passed for c in report.cases), [(c.name, c.message) for c in report.cases]


@pytest.mark.gpu
def test_a_4_kib_scratch_array_is_under_the_default_limit() -> None:
    # 4 KiB a thread reserves about 1.03 GiB on an H200: over the 1 GiB limit on global
    # variables, which the frame limit once borrowed, and well under local_memory_mb's 8 GiB.
    lab = load_builtin_lab("matmul-naive")
    source = (KERNELS_DIR / "local_frame_128k.cu").read_text(encoding="utf-8")
    report = grade_source(
        lab, source.replace("32768", "1024"), secret=SECRET, sanitizer=False, timing=False
    )
    assert all(c.passed for c in report.cases), [(c.name, c.message) for c in report.cases]
