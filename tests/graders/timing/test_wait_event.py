"""wait_event tells a failed kernel from a running one (CPU test: the event query is scripted).

On a GPU, CuPy's `Event.done` reads False for a kernel that trapped as well as for one still
running; the GPU test for the real thing is tests/security (trap.cu, misaligned_read.cu, ...).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

cupy = pytest.importorskip("cupy")
from cupy.cuda import runtime  # noqa: E402

from graders.run.harness import classify_cuda_error  # noqa: E402
from graders.timing.repetitions import KernelHung, wait_event  # noqa: E402


@dataclass
class FakeEvent:
    ptr: int = 1234


def scripted(monkeypatch: pytest.MonkeyPatch, statuses: list[int]) -> None:
    answers = iter(statuses)
    monkeypatch.setattr(runtime, "eventQuery", lambda ptr: next(answers, statuses[-1]))


def test_a_finished_event_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted(monkeypatch, [600, 600, 0])  # not ready, not ready, done
    wait_event(FakeEvent(), time.monotonic() + 5)


def test_a_kernel_that_never_finishes_is_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted(monkeypatch, [600])
    with pytest.raises(KernelHung):
        wait_event(FakeEvent(), time.monotonic() + 0.05)


@pytest.mark.parametrize(
    ("status", "words"),
    [(719, "__trap()"), (700, "illegal address"), (716, "misaligned")],
)
def test_a_failed_kernel_is_an_error_at_once_not_a_hang(
    monkeypatch: pytest.MonkeyPatch, status: int, words: str
) -> None:
    # Even with the deadline already past, the error is what is reported, not a hang.
    scripted(monkeypatch, [status])
    with pytest.raises(runtime.CUDARuntimeError) as caught:
        wait_event(FakeEvent(), time.monotonic() - 1)
    failure = classify_cuda_error(caught.value)
    assert failure.verdict == "kernel_error" and failure.sticky
    assert words in failure.message
