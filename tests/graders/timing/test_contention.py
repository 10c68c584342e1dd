"""Work outside the lock, as NVML shows it, around a timed section."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pytest

from graders.timing import contention


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


def test_a_process_whose_work_ended_as_the_section_began_is_not_counted(fake: FakeNvml) -> None:
    window = contention.Window.__new__(contention.Window)
    began = 10_000_000_000
    fake.samples = [Sample(77, began - 400_000, 80)]  # busy in the second before
    window = contention.Window(began_us=began)
    window._nvml, window._handle = fake, "gpu0"
    window._before = contention._busy_since(fake, "gpu0", began - 1_000_000)
    fake.samples.append(Sample(77, began + contention.SETTLE_US, 30))  # its last, settling
    assert window.others() == {}
    fake.samples.append(Sample(77, began + contention.SETTLE_US + 1, 30))  # still going later
    assert window.others() == {77: 30}


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
