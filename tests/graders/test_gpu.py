"""GPU probes that need no GPU: the lock for timed sections, and a clear reason without a GPU."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import pytest

from graders import gpu


def test_unavailable_reason_never_raises_and_is_a_sentence_or_none() -> None:
    reason = gpu.gpu_unavailable_reason()
    assert reason is None or (reason[0].isupper() and reason.endswith("."))


def test_lock_is_exclusive_across_open_files(tmp_path: Path) -> None:
    with gpu.gpu_lock(tmp_path, key="test") as waited:
        assert waited >= 0
        path = tmp_path / "kernelgrader-timing-test.lock"
        fd = os.open(path, os.O_RDWR)
        try:
            # Another holder (another process opens its own file description) must wait.
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                got_it = True
            except BlockingIOError:
                got_it = False
            assert not got_it
        finally:
            os.close(fd)
    fd = os.open(tmp_path / "kernelgrader-timing-test.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released: free to take now
    finally:
        os.close(fd)


def test_second_timed_section_waits_for_the_first(tmp_path: Path) -> None:
    order: list[str] = []
    inside = threading.Event()
    release = threading.Event()

    def first() -> None:
        with gpu.gpu_lock(tmp_path, key="k"):
            order.append("first in")
            inside.set()
            release.wait(5)
            order.append("first out")

    t = threading.Thread(target=first)
    t.start()
    inside.wait(5)
    release.set()
    with gpu.gpu_lock(tmp_path, key="k"):
        order.append("second in")
    t.join()
    assert order == ["first in", "first out", "second in"]


def test_each_visible_gpu_has_its_own_timing_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    # `worker --gpus` gives each child one GPU through CUDA_VISIBLE_DEVICES, by index or UUID.
    keys = {}
    for visible in ("0", "1", "GPU-8c7a1d3e-aaaa", "MIG-5d1e-bbbb"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        keys[visible] = gpu._gpu_key()
        assert keys[visible] == gpu._gpu_key()
    assert len(set(keys.values())) == 4, keys
