"""wait_event tells a failed kernel from a running one (CPU test: the event query is scripted).

On a GPU, CuPy's `Event.done` reads False for a kernel that trapped as well as for one still
running; the GPU test for the real thing is tests/security (trap.cu, misaligned_read.cu, ...).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

cupy = pytest.importorskip("cupy")
from cupy.cuda import runtime  # noqa: E402

from graders.run.harness import classify_cuda_error  # noqa: E402
from graders.timing.repetitions import KernelHung, L2Flusher, wait_event  # noqa: E402


@dataclass
class FakeEvent:
    ptr: int = 1234


def scripted(monkeypatch: pytest.MonkeyPatch, statuses: list[int]) -> list[int]:
    """The event query answers `statuses` in turn (then the last again); returns the pointers
    it was asked about."""
    answers = iter(statuses)
    asked: list[int] = []

    def query(ptr: int) -> int:
        asked.append(ptr)
        return next(answers, statuses[-1])

    monkeypatch.setattr(runtime, "eventQuery", query)
    return asked


def test_a_finished_event_returns_once_its_query_says_done(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = scripted(monkeypatch, [600, 600, 0])  # not ready, not ready, done
    naps: list[float] = []
    monkeypatch.setattr(time, "sleep", naps.append)
    wait_event(FakeEvent(), time.monotonic() + 5)
    # It asked about this event until the query said done, and no longer; between two queries
    # it slept a fraction of a millisecond.
    assert asked == [1234, 1234, 1234]
    assert len(naps) == 2 and all(0 < nap <= 0.001 for nap in naps)


def test_at_the_deadline_itself_it_still_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = scripted(monkeypatch, [600, 0])
    monkeypatch.setattr(time, "monotonic", lambda: 100.0)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    wait_event(FakeEvent(), 100.0)  # not past it: the next query says done
    assert len(asked) == 2


def test_a_kernel_that_never_finishes_is_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted(monkeypatch, [600])
    with pytest.raises(KernelHung, match=r"^the kernel did not finish in time$"):
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


class FakeDevice:
    id = 2  # the current device, which the flusher asks about


@dataclass
class FakePointer:
    ptr: int


@dataclass
class FakeBuffer:
    nbytes: int
    data: FakePointer = field(default_factory=lambda: FakePointer(0xB0))


def fake_l2(monkeypatch: pytest.MonkeyPatch, props: dict[str, int]) -> list[tuple[int, ...]]:
    """CuPy's device calls as a GPU with these properties answers them; returns the memsets."""
    memsets: list[tuple[int, ...]] = []
    monkeypatch.setattr(cupy.cuda, "Device", FakeDevice)
    monkeypatch.setattr(
        runtime, "getDeviceProperties", lambda index: props if index == FakeDevice.id else {}
    )
    monkeypatch.setattr(cupy, "empty", lambda n, dtype: FakeBuffer(n) if dtype is cupy.uint8 else 0)
    monkeypatch.setattr(cupy.cuda, "get_current_stream", lambda: FakePointer(0x57))
    monkeypatch.setattr(runtime, "memsetAsync", lambda *args: memsets.append(args))
    return memsets


def test_the_flush_buffer_is_twice_the_l2_and_at_least_8_mib(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_l2(monkeypatch, {"l2CacheSize": 50 << 20})
    assert L2Flusher().nbytes == 100 << 20  # another device's properties would be empty
    assert L2Flusher().buffer.nbytes == 100 << 20
    fake_l2(monkeypatch, {"l2CacheSize": 1 << 20})
    assert L2Flusher().nbytes == 8 << 20
    fake_l2(monkeypatch, {})
    assert L2Flusher().nbytes == 8 << 20


def test_each_flush_writes_the_whole_buffer_with_a_new_byte(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memsets = fake_l2(monkeypatch, {"l2CacheSize": 50 << 20})
    flusher = L2Flusher()
    for _ in range(252):
        flusher.flush()
    assert all(args[0] == 0xB0 and args[2:] == (100 << 20, 0x57) for args in memsets)
    values = [args[1] for args in memsets]
    assert values[:3] == [1, 2, 3] and values[249:] == [250, 0, 1]
