"""A run child whose own Python failed is the grader's failure, never the running case's verdict.

Seen on an H100: a TypeError in the grader's timed-section setup read as "the kernel crashed
it ... counted as failed" (`kernel_error`) on the timed case. A CUDA error escaping the child is
still the running case's verdict: a kernel that broke its context causes those.
"""

from __future__ import annotations

import pytest

from graders.results import GradeReport
from graders.run.stage import _Follow, _take_outcome, grader_bug
from graders.sandbox.runner import SandboxOutcome
from graders.spec import load_builtin_lab

LAB = load_builtin_lab("matmul-tiled")
GRADER_FAILED = (
    "The grader failed while handling this submission. This is not your fault: please "
    "resubmit, and tell the course staff if it happens again."
)


def _raised(detail: str, reason: str = "internal") -> SandboxOutcome:
    return SandboxOutcome(
        ok=False, value=None, reason=reason, message=GRADER_FAILED, exit_code=0, signal=None,
        timed_out=False, stdout="", stdout_truncated=False, seconds=2.0,
        log=["ready: warm-up took 3.1 s", f"child raised {detail}", "Traceback ..."],
    )  # fmt: skip


def _taken(outcome: SandboxOutcome) -> tuple[str, GradeReport, dict]:
    assert LAB.timing is not None
    report = GradeReport(lab=LAB.id, cases=[], score=0, max_score=LAB.max_score)
    results: dict = {}
    follow = _Follow([c.name for c in LAB.cases], results, None)
    follow.running = "timing"  # the child had said its timed section began
    stopped = _take_outcome(LAB, outcome, follow, results, report, {c.name: 1 for c in LAB.cases})
    return stopped, report, results


@pytest.mark.parametrize(
    "detail",
    [
        "TypeError: a bytes-like object is required, not 'PinnedMemory'",
        "AttributeError: 'NoneType' object has no attribute 'ptr'",
        "KeyError: 'square-2048'",
    ],
)
def test_the_graders_own_exception_is_an_internal_error(detail: str) -> None:
    stopped, report, results = _taken(_raised(detail))
    assert grader_bug(_raised(detail)) == detail
    assert stopped == "" and report.error == "internal"
    assert "not your fault" in report.summary
    assert LAB.timing is not None and LAB.timing.case not in results  # no verdict on it


@pytest.mark.parametrize(
    "detail",
    [
        "CUDARuntimeError: cudaErrorIllegalAddress: an illegal memory access was encountered",
        "CUDADriverError: CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure",
        "OutOfMemoryError: Out of memory allocating 16,777,216 bytes",
    ],
)
def test_a_cuda_error_escaping_the_child_is_still_the_running_cases_verdict(detail: str) -> None:
    stopped, report, results = _taken(_raised(detail))
    assert grader_bug(_raised(detail)) == ""
    assert LAB.timing is not None
    assert stopped == "kernel_error" and results[LAB.timing.case].verdict == "kernel_error"
    assert report.error == ""


def test_a_child_that_was_killed_is_judged_as_before() -> None:
    # Killed for its memory, say: the child did not answer with an exception of its own.
    outcome = _raised("TypeError: never mind", reason="crashed")
    assert grader_bug(outcome) == ""
    stopped, report, _ = _taken(outcome)
    assert stopped == "kernel_error" and report.error == ""
