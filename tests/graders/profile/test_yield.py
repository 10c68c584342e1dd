"""A worker's profile lets go of the GPU when a timed section waits (no GPU needed: the
program under "ncu" here is a sleeping Python, and the lock is the real host-wide one in a
temporary folder). The GPU side is tests/graders/gpu/test_profile_gpu.py."""

from __future__ import annotations

import sys
import threading
import uuid
from pathlib import Path

from graders.profile.child import _run_ncu
from graders.profile.tool import YIELDED
from graders.timing.lock import GpuLock
from tests.conftest import command_lines_with


def _sleeper(marker: str) -> list[str]:
    return [sys.executable, "-c", "import time; time.sleep(120)", marker]


def test_the_profiler_is_stopped_once_a_timed_section_waits(tmp_path: Path) -> None:
    lock = GpuLock(tmp_path, "test-gpu")
    marker = f"kg-profiled-{uuid.uuid4().hex}"
    held, writer_in = threading.Event(), threading.Event()
    release = threading.Event()

    def reader() -> None:  # the profiled program's shared hold
        with lock.shared():
            held.set()
            release.wait(60)

    def writer() -> None:  # a timed section
        with lock.exclusive():
            writer_in.set()

    threads = [threading.Thread(target=reader), threading.Thread(target=writer)]
    threads[0].start()
    assert held.wait(60)
    threads[1].start()
    try:
        for _ in range(600):  # until the writer waits (at most a minute)
            if lock.writer_waiting():
                break
            threading.Event().wait(0.1)
        status, _, _ = _run_ncu(_sleeper(marker), tmp_path, 100.0, lock)
        assert status == YIELDED
        assert not command_lines_with(marker)  # its process group is killed, the program with it
        assert not writer_in.is_set()  # the reader still holds it: the writer still waits
    finally:
        release.set()
        for t in threads:
            t.join(60)
    assert writer_in.is_set()


def test_without_the_lock_it_runs_to_its_end_or_its_limit(tmp_path: Path) -> None:
    lock = GpuLock(tmp_path, "test-gpu")
    marker = f"kg-profiled-{uuid.uuid4().hex}"
    status, _, _ = _run_ncu(_sleeper(marker)[:2] + ["pass", marker], tmp_path, 100.0, lock)
    assert status == "done"  # nobody waits: the program ends on its own
    status, _, _ = _run_ncu(_sleeper(marker), tmp_path, 1.0, None)
    assert status == "timeout"
    assert not command_lines_with(marker)
