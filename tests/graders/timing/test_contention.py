"""Work outside the lock, as NVML shows it, around a timed section."""

from __future__ import annotations

import os
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
