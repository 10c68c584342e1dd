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


def test_the_gpu_lock_lives_in_the_given_folder_under_the_gpus_key(tmp_path: Path) -> None:
    lock = gpu.gpu_lock(tmp_path, key="test")
    with lock.exclusive() as waited:
        assert waited >= 0
        fd = os.open(tmp_path / "kernelgrader-gpu-test.lock", os.O_RDWR)
        try:
            # Another holder (another process opens its own file description) must wait.
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                got_it = True
            except BlockingIOError:
                got_it = False
            assert not got_it
        finally:
            os.close(fd)


def test_second_timed_section_waits_for_the_first(tmp_path: Path) -> None:
    order: list[str] = []
    inside = threading.Event()
    release = threading.Event()

    def first() -> None:
        with gpu.gpu_lock(tmp_path, key="k").exclusive():
            order.append("first in")
            inside.set()
            release.wait(5)
            order.append("first out")

    t = threading.Thread(target=first)
    t.start()
    inside.wait(5)
    release.set()
    with gpu.gpu_lock(tmp_path, key="k").exclusive():
        order.append("second in")
    t.join()
    assert order == ["first in", "first out", "second in"]


def test_each_visible_gpu_has_its_own_timing_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    # `worker --gpus` gives each child one GPU through CUDA_VISIBLE_DEVICES, by index or UUID.
    keys = {}
    for visible in ("0", "1", "GPU-8c7a1d3e-aaaa", "MIG-5d1e-bbbb"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        keys[visible] = gpu.gpu_key()
        assert keys[visible] == gpu.gpu_key()
    assert len(set(keys.values())) == 4, keys


# The health check's patience, with the GPU's answers stood in for: a probe that fails once
# (a context still being torn down beside it), a killed process NVML still lists for a while.


def test_a_failed_health_probe_is_tried_again_before_the_gpu_is_called_unhealthy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers = [{"error": "the GPU did not answer a simple request (busy)"}, {"count": 1}]
    monkeypatch.setattr(gpu, "_probe", lambda health=False: answers.pop(0))
    monkeypatch.setattr(gpu, "HEALTH_RETRY_PAUSE_S", 0.0)
    assert gpu.check_gpu_health() is None
    assert answers == []
    failing = {"error": "a test computation gave 0.0 instead of 1.0"}
    monkeypatch.setattr(gpu, "_probe", lambda health=False: failing)
    said = gpu.check_gpu_health()
    assert said is not None and said.startswith("The GPU is not healthy: a test computation")


def test_the_health_probe_waits_until_the_killed_process_has_left_the_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listed = [{41, 42}, {41, 42}, {41}]  # 42 was killed; the driver lets go of it on the third look
    events: list[str] = []

    def processes() -> set[int]:
        events.append("looked")
        return listed.pop(0) if listed else {41}

    def probe(health: bool = False) -> dict[str, object]:
        events.append("probed")
        return {"count": 1}

    monkeypatch.setattr(gpu, "gpu_process_ids", processes)
    monkeypatch.setattr(gpu, "_probe", probe)
    assert gpu.check_gpu_health(killed_pid=42) is None
    assert events == ["looked", "looked", "looked", "probed"]
    # Where nothing can list the GPU's processes, the probe runs at once.
    events.clear()
    monkeypatch.setattr(gpu, "gpu_process_ids", lambda: None)
    assert gpu.check_gpu_health(killed_pid=42) is None
    assert events == ["probed"]
