"""Kernel errors named in plain words, and the progress log the parent reads (no GPU needed)."""

from __future__ import annotations

from graders.run import harness


class FakeCudaError(Exception):
    """Stands in for CuPy's error types, whose text is all the grader reads."""


def test_illegal_address_is_a_sticky_kernel_error() -> None:
    for text in (
        "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered",
        "cudaErrorIllegalAddress: an illegal memory access was encountered",
    ):
        f = harness.classify_cuda_error(FakeCudaError(text))
        assert f.verdict == "kernel_error" and f.sticky
        assert "illegal address" in f.message


def test_trap_and_launch_failure_are_sticky() -> None:
    for text in (
        "cudaErrorLaunchFailure: unspecified launch failure",
        "CUDA_ERROR_ILLEGAL_INSTRUCTION: an illegal instruction was encountered",
    ):
        f = harness.classify_cuda_error(FakeCudaError(text))
        assert f.sticky and "__trap()" in f.message


def test_too_many_resources_is_a_launch_error_that_names_the_block() -> None:
    f = harness.classify_cuda_error(
        FakeCudaError("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: too many resources requested"),
        threads=1024,
    )
    assert f.verdict == "launch_error" and not f.sticky
    assert "1024 threads" in f.message and "registers" in f.message


def test_unknown_errors_are_treated_as_fatal_to_the_context() -> None:
    f = harness.classify_cuda_error(FakeCudaError("CUDA_ERROR_SOMETHING_NEW: who knows"))
    assert f.sticky and f.verdict == "kernel_error"


def test_a_hang_becomes_a_timeout_with_the_barrier_hint() -> None:
    from graders.timing.repetitions import KernelHung

    f = harness.as_failure(KernelHung("late"), 10)
    assert f.verdict == "timeout" and f.sticky
    assert f.message.startswith("Killed after 10 s") and "__syncthreads()" in f.message
