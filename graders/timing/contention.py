"""Noticing work that the GPU's lock cannot keep out of a timed section.

Every grading on a host takes the GPU's lock (graders.timing.lock), so a timed section runs alone
among gradings. Anything else on the GPU (a training job, a worker of another install, a child a
killed worker left spinning) does not take it. NVML samples each process's share of the SMs:
around a timed section the run child asks which processes used the GPU during it, and counts
those that never took the lock (the lock's users cannot have run while it was held alone; one
that stopped just before the section began may still show a sample stamped just after).

NVML samples a process's use every so often, not continuously: a section shorter than that (a
small timed case's, 30 ms) may have no sample of its own. So once the section is closed, and
after the lock is let go, `others()` waits (at most SAMPLE_WAIT_S) for a sample stamped after
the section's end; that sample covers the section's time too.

Where NVML does not list this process (a container without the host's PID namespace, or NVML
missing), nothing can be told apart: `Window.note` says so and nothing is counted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from graders.nvml import visible_handle


def _now_us() -> int:
    return int(time.time() * 1_000_000)


# The longest `others()` waits for NVML's first sample after a closed section.
SAMPLE_WAIT_S = 1.0


def _samples(nvml: Any, handle: Any, since_us: int) -> list[Any]:
    try:
        return list(nvml.nvmlDeviceGetProcessUtilization(handle, since_us))
    except Exception:  # NVML_ERROR_NOT_FOUND: no sample since; others: nothing to say
        return []


def _busy(samples: list[Any]) -> dict[int, tuple[int, int]]:
    """pid -> (latest sample's time, its SM %) for processes with SM use in `samples`."""
    out: dict[int, tuple[int, int]] = {}
    for s in samples:
        if int(s.smUtil) <= 0:
            continue
        pid, stamp = int(s.pid), int(s.timeStamp)
        if pid not in out or stamp > out[pid][0]:
            out[pid] = (stamp, int(s.smUtil))
    return out


@dataclass
class Window:
    """Opened as a timed section starts; `others()` once it ends."""

    began_us: int = field(default_factory=_now_us)
    ended_us: int | None = None  # set by `close`
    me: int = field(default_factory=os.getpid)
    note: str = ""
    # The pids of the processes that take the GPU's lock: never counted (see the docstring).
    users: Callable[[], set[int]] = field(default=set)
    _nvml: Any = None
    _handle: Any = None

    @classmethod
    def open(cls, users: Callable[[], set[int]] = set) -> Window:
        window = cls(users=users)
        nvml, handle = visible_handle()
        if nvml is None:
            window.note = "NVML is not available here: work outside the lock cannot be seen."
            return window
        window._nvml, window._handle = nvml, handle
        try:
            listed = {int(p.pid) for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)}
        except Exception:
            listed = set()
        if window.me not in listed:
            window.note = (
                "NVML does not list this process (a container without the host's PID "
                "namespace?): work outside the lock cannot be seen."
            )
            window._nvml = None
        return window

    def close(self) -> None:
        """The section has ended (called before the lock is let go)."""
        self.ended_us = _now_us()

    def others(
        self,
        *,
        wait_s: float = SAMPLE_WAIT_S,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> dict[int, int]:
        """pid -> SM % of each other process that used the GPU since the window opened; for a
        closed window, once NVML has a sample from after its end (or `wait_s` has passed)."""
        if self._nvml is None:
            return {}
        samples = _samples(self._nvml, self._handle, self.began_us)
        if self.ended_us is not None:
            until = clock() + wait_s
            ended = self.ended_us
            while clock() < until and not any(int(s.timeStamp) >= ended for s in samples):
                sleep(0.02)
                samples = _samples(self._nvml, self._handle, self.began_us)
        busy = _busy(samples)
        lock_users = self.users() if busy else set()
        return {
            pid: util for pid, (_, util) in busy.items() if pid != self.me and pid not in lock_users
        }


def describe(busy: dict[int, int]) -> str:
    """A sentence for staff naming the processes."""
    listed = ", ".join(f"pid {pid} ({util} % of the SMs)" for pid, util in sorted(busy.items()))
    return f"other processes used the GPU during the timed section: {listed}"
