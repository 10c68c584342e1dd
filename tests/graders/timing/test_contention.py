"""Work outside the lock, as NVML shows it, around a timed section."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from graders.timing import contention
from graders.timing.lock import GpuLock


@dataclass
class Sample:
    pid: int
    timeStamp: int  # noqa: N815 - NVML's field name
    smUtil: int  # noqa: N815
    memUtil: int = 0  # noqa: N815


@dataclass
class Proc:
    pid: int
    usedGpuMemory: int = 1 << 29  # noqa: N815


class FakeNvml:
    def __init__(self, procs: list[int], samples: list[Sample]) -> None:
        self.procs = procs
        self.samples = samples

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:  # noqa: N802
        return "gpu0"

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Proc]:  # noqa: N802
        return [Proc(p) for p in self.procs]

    def nvmlDeviceGetProcessUtilization(self, handle: Any, since: int) -> list[Sample]:  # noqa: N802
        if handle is None:
            raise RuntimeError("NVML_ERROR_INVALID_ARGUMENT")
        return [s for s in self.samples if s.timeStamp > since]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    nvml = FakeNvml([os.getpid()], [])
    monkeypatch.setattr("graders.nvml.nvml", lambda: nvml)
    return nvml


def test_another_process_busy_during_the_section_is_named(fake: FakeNvml) -> None:
    window = contention.Window.open()
    fake.samples = [
        Sample(4242, window.began_us + 300_000, 57),
        Sample(os.getpid(), window.began_us + 300_000, 90),  # this process: never counted
        Sample(5151, window.began_us + 300_000, 0),  # listed, but idle
    ]
    assert window.others() == {4242: 57}
    assert "pid 4242 (57 % of the SMs)" in contention.describe(window.others())


def test_the_locks_own_users_are_never_counted(fake: FakeNvml) -> None:
    # A grading that took the lock cannot run while a timed section holds it alone: a sample of
    # one stamped just after the section began is its work ending, not contention.
    window = contention.Window.open(users=lambda: {77, 88})
    fake.samples = [
        Sample(77, window.began_us + 100_000, 80),
        Sample(99, window.began_us + 100_000, 15),
    ]
    assert window.others() == {99: 15}


def test_the_lock_keeps_the_pids_of_its_users(tmp_path: Path) -> None:
    lock = GpuLock(tmp_path, "GPU-users")
    assert lock.users() == set()
    with lock.shared():
        pass
    assert lock.users() == {os.getpid()}
    with lock.exclusive():
        pass
    assert lock.users() == {os.getpid()}


def test_nothing_is_counted_where_nvml_does_not_list_this_process(
    fake: FakeNvml,
) -> None:
    fake.procs = [1234]  # a container without the host's PID namespace
    window = contention.Window.open()
    fake.samples = [Sample(1234, window.began_us + 1, 99)]
    assert window.others() == {}
    assert "does not list this process" in window.note


def test_without_nvml_the_window_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("graders.nvml.nvml", lambda: None)
    window = contention.Window.open()
    assert window.others() == {} and "NVML is not available" in window.note


class RecordingNvml(FakeNvml):
    """Fails a call about any GPU but the handle it gave out for the visible index."""

    def __init__(self, procs: list[int], samples: list[Sample]) -> None:
        super().__init__(procs, samples)
        self.indexes: list[int] = []
        self.handles: list[Any] = []

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:  # noqa: N802
        self.indexes.append(index)
        return f"gpu{index}"

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Proc]:  # noqa: N802
        self.handles.append(handle)
        return super().nvmlDeviceGetComputeRunningProcesses(handle)

    def nvmlDeviceGetProcessUtilization(self, handle: Any, since: int) -> list[Sample]:  # noqa: N802
        self.handles.append(handle)
        return super().nvmlDeviceGetProcessUtilization(handle, since)


def test_the_window_asks_nvml_about_the_visible_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = RecordingNvml([os.getpid()], [])
    monkeypatch.setattr("graders.nvml.nvml", lambda: nvml)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    window = contention.Window.open()
    nvml.samples = [Sample(4242, window.began_us + 1, 20)]
    assert window.others() == {4242: 20}
    assert nvml.indexes == [3] and nvml.handles == ["gpu3", "gpu3"]


def test_the_window_opens_at_the_time_now_in_microseconds(fake: FakeNvml) -> None:
    before = int(time.time() * 1_000_000)
    window = contention.Window.open()
    after = int(time.time() * 1_000_000)
    assert before <= window.began_us <= after


def test_one_percent_of_the_sms_counts_and_an_idle_sample_does_not_hide_later_ones(
    fake: FakeNvml,
) -> None:
    window = contention.Window.open()
    fake.samples = [
        Sample(5151, window.began_us + 10, 0),
        Sample(4242, window.began_us + 20, 1),
    ]
    assert window.others() == {4242: 1}


def test_a_process_is_counted_at_its_latest_sample_whatever_the_order(fake: FakeNvml) -> None:
    window = contention.Window.open()
    fake.samples = [
        Sample(4242, window.began_us + 300, 5),
        Sample(4242, window.began_us + 200, 80),
        Sample(4243, window.began_us + 100, 90),
        Sample(4243, window.began_us + 400, 10),
    ]
    assert window.others() == {4242: 5, 4243: 10}


def test_the_lock_users_are_read_only_when_someone_was_busy(fake: FakeNvml) -> None:
    reads: list[int] = []

    def users() -> set[int]:
        reads.append(1)
        return set()

    window = contention.Window.open(users=users)
    assert window.others() == {} and reads == []
    fake.samples = [Sample(4242, window.began_us + 1, 30)]
    assert window.others() == {4242: 30} and reads == [1]


def test_the_notes_say_why_nothing_can_be_seen(
    fake: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.procs = [1234]
    assert contention.Window.open().note == (
        "NVML does not list this process (a container without the host's PID namespace?): "
        "work outside the lock cannot be seen."
    )

    def broken(handle: Any) -> list[Proc]:
        raise RuntimeError("NVML_ERROR_UNKNOWN")

    monkeypatch.setattr(fake, "nvmlDeviceGetComputeRunningProcesses", broken)
    window = contention.Window.open()
    assert window.note.startswith("NVML does not list this process") and window.others() == {}
    monkeypatch.setattr("graders.nvml.nvml", lambda: None)
    assert contention.Window.open().note == (
        "NVML is not available here: work outside the lock cannot be seen."
    )


def test_the_sentence_lists_every_process_by_pid() -> None:
    assert contention.describe({77: 5, 12: 40}) == (
        "other processes used the GPU during the timed section: "
        "pid 12 (40 % of the SMs), pid 77 (5 % of the SMs)"
    )


def test_a_closed_window_waits_for_the_sample_that_covers_a_short_section(
    fake: FakeNvml,
) -> None:
    # A 30 ms section: NVML's next sample comes after it ends, and that one shows the spinner.
    window = contention.Window.open()
    window.close()
    assert window.ended_us is not None
    later = window.ended_us + 150_000
    now, sleeps = [0.0], []

    def sleep(s: float) -> None:
        sleeps.append(s)
        now[0] += s
        if len(sleeps) == 5:  # the sample lands 0.1 s later
            fake.samples = [Sample(4242, later, 80), Sample(os.getpid(), later, 95)]

    assert window.others(sleep=sleep, clock=lambda: now[0]) == {4242: 80}
    assert len(sleeps) == 5


def test_the_wait_for_a_late_sample_is_bounded_and_an_open_window_does_not_wait(
    fake: FakeNvml,
) -> None:
    window = contention.Window.open()
    # A sample from inside the section is not the one after it: keep waiting, up to wait_s.
    fake.samples = [Sample(os.getpid(), window.began_us + 1, 90)]
    window.close()
    now, sleeps = [0.0], []

    def sleep(s: float) -> None:
        sleeps.append(s)
        now[0] += s

    assert window.others(wait_s=0.5, sleep=sleep, clock=lambda: now[0]) == {}
    assert 0.5 <= now[0] < 0.6
    # Not closed (the old use): asks once, no waiting.
    sleeps.clear()
    assert contention.Window.open().others(sleep=sleep) == {}
    assert sleeps == []


def test_a_sample_stamped_at_the_sections_very_end_is_the_one_waited_for(fake: FakeNvml) -> None:
    window = contention.Window.open()
    window.close()
    assert window.ended_us is not None
    fake.samples = [Sample(4242, window.ended_us, 40)]
    sleeps: list[float] = []
    assert window.others(sleep=sleeps.append) == {4242: 40}
    assert sleeps == []


def test_the_wait_ends_exactly_at_its_bound(fake: FakeNvml) -> None:
    window = contention.Window.open()
    window.close()
    ticks = iter([0.0, 0.25, 0.5, 0.75, 1.0])  # the bound, 0.5 s, is reached exactly
    sleeps: list[float] = []
    assert window.others(wait_s=0.5, sleep=sleeps.append, clock=lambda: next(ticks)) == {}
    assert len(sleeps) == 1  # at 0.25 s; at 0.5 s the wait is over
