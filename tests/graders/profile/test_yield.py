"""A worker's profile lets go of the GPU when a timed section waits (no GPU needed: the
program under "ncu" here is a sleeping Python, and the lock is the real host-wide one in a
temporary folder). The GPU side is tests/graders/gpu/test_profile_gpu.py."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from graders.profile.child import PROFILER_BUSY, _profile_one, _run_ncu
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


def _fake_ncu(folder: Path) -> tuple[str, Path]:
    """A stand-in for ncu that only notes that it ran (so it writes no report)."""
    ran = folder / "ncu-ran"
    script = folder / "fake-ncu"
    script.write_text(f"#!/bin/sh\necho ran >> {ran}\n", encoding="utf-8")
    script.chmod(0o755)
    return str(script), ran


def _profile(
    program: str, lock_dir: Path, seconds: float, yield_to_timing: bool = False
) -> dict[str, Any]:
    item = {"name": "submission", "cubin_b64": "", "source": "", "filename": "k.cu"}
    common = {
        "kernels": ["k"],
        "launches": 1,
        "timeout_s": seconds,
        "lock_dir": str(lock_dir),
        "yield_to_timing": yield_to_timing,
    }
    return _profile_one(program, item, common, time.monotonic() + seconds, None)


@pytest.fixture
def child_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path, GpuLock]:
    """A profile child's folder with a fake ncu in it: (ncu, the file it leaves, the lock)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KERNELGRADER_GPU_KEY", "test-gpu")
    program, ran = _fake_ncu(tmp_path)
    return program, ran, GpuLock(tmp_path, "test-gpu")


def test_one_profile_at_a_time_on_a_gpu_and_one_kept_waiting_too_long_says_so(
    tmp_path: Path, child_folder: tuple[str, Path, GpuLock]
) -> None:
    program, ran, lock = child_folder
    with lock.profiler(until=time.monotonic()) as held:  # another child's ncu session
        assert held
        out = _profile(program, tmp_path, 6.5)
        assert (out["status"], out["message"]) == ("timeout", PROFILER_BUSY)
        assert not ran.exists()
    out = _profile(program, tmp_path, 30.0)  # free: ncu runs (and, being fake, reports nothing)
    assert ran.exists()
    assert out["status"] == "no_report" and "the program it ran ended early" in out["message"]


def test_a_profile_waiting_for_the_profiler_gives_way_to_a_timed_section(
    tmp_path: Path, child_folder: tuple[str, Path, GpuLock]
) -> None:
    program, ran, lock = child_folder
    release, reading, writer_in = threading.Event(), threading.Event(), threading.Event()

    def reader() -> None:  # a shared holder that keeps the timed section waiting
        with lock.shared():
            reading.set()
            release.wait(60)

    def writer() -> None:
        with lock.exclusive():
            writer_in.set()

    threads = [threading.Thread(target=reader), threading.Thread(target=writer)]
    try:
        with lock.profiler(until=time.monotonic()) as held:
            assert held
            threads[0].start()
            assert reading.wait(60)  # else the writer may take the lock at once, and not wait
            threads[1].start()
            for _ in range(600):
                if lock.writer_waiting():
                    break
                time.sleep(0.1)
            assert lock.writer_waiting()
            out = _profile(program, tmp_path, 60.0, yield_to_timing=True)
        assert out["status"] == YIELDED
        assert not ran.exists()
    finally:
        release.set()
        for t in threads:
            t.join(60)
    assert writer_in.is_set()
