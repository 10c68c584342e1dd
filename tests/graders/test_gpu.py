"""GPU probes that need no GPU: the lock for timed sections, and a clear reason without a GPU."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from graders import gpu

ROOT = Path(__file__).resolve().parents[2]


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


def test_the_lock_folder_is_a_host_folder_whatever_the_data_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("KERNELGRADER_LOCK_DIR", raising=False)
    monkeypatch.setenv("KERNELGRADER_DATA_DIR", str(tmp_path))
    assert gpu.lock_dir() in gpu.HOST_LOCK_DIRS
    monkeypatch.setenv("KERNELGRADER_LOCK_DIR", str(tmp_path / "chosen"))
    assert gpu.lock_dir() == (tmp_path / "chosen").resolve()  # a setting still wins


def test_the_first_usable_host_folder_is_made_for_every_user(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    first = blocked / "kernelgrader"  # cannot be made: its parent is a file
    (tmp_path / "run-lock").mkdir()
    second = tmp_path / "run-lock" / "kernelgrader"
    old = os.umask(0o022)
    try:
        chosen = gpu.host_lock_dir((first, second, tmp_path / "last"))
    finally:
        os.umask(old)
    assert chosen == second
    assert second.stat().st_mode & 0o7777 == 0o1777  # world-writable, sticky
    assert gpu.host_lock_dir((first, second, tmp_path / "last")) == second


def test_a_given_gpu_key_and_a_uuid_in_cuda_visible_devices_name_the_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("KERNELGRADER_GPU_KEY", "GPU-given/../x")
    assert gpu.gpu_key() == "GPU-givenx"
    monkeypatch.delenv("KERNELGRADER_GPU_KEY")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8c7a1d3e-1111,1")
    assert gpu.gpu_key() == "GPU-8c7a1d3e-1111"


# Two worker-like processes with data folders of their own, and nothing else set: one holds
# the GPU's lock alone, the other waits for it.
_WORKER = r"""
import sys, time
from pathlib import Path
from graders.gpu import gpu_lock
log, mode, name, release = Path(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])
def note(text):
    with open(log, "a") as f:
        f.write(f"{name} {text}\n")
lock = gpu_lock()
hold = lock.exclusive if mode == "exclusive" else lock.shared
with hold(on_wait=lambda: note("waiting"), on_held=lambda: note("held")):
    for _ in range(6000):
        if release.exists():
            break
        time.sleep(0.01)
    note("releasing")
"""


def start_lock_worker(
    data_dir: Path, log: Path, mode: str, name: str, release: Path, **env: str
) -> subprocess.Popen[bytes]:
    """A process with its own data folder that takes the GPU's default lock (see _WORKER)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    unset = ("KERNELGRADER_LOCK_DIR", "KERNELGRADER_GPU_KEY", "CUDA_VISIBLE_DEVICES")
    clean = {k: v for k, v in os.environ.items() if k not in unset}
    return subprocess.Popen(
        [sys.executable, "-c", _WORKER, str(log), mode, name, str(release)],
        env={**clean, "PYTHONPATH": str(ROOT), "KERNELGRADER_DATA_DIR": str(data_dir), **env},
    )


def wait_for_line(log: Path, line: str) -> list[str]:
    for _ in range(3000):
        lines = log.read_text().splitlines() if log.exists() else []
        if line in lines:
            return lines
        time.sleep(0.01)
    raise AssertionError(f"never saw {line!r} in {log}")


def test_workers_with_different_data_folders_share_one_lock(tmp_path: Path) -> None:
    key = f"test-{uuid.uuid4()}"  # this test's own GPU, in the host's real lock folder
    log, go = tmp_path / "log", tmp_path / "go"
    first = start_lock_worker(tmp_path / "a", log, "exclusive", "A", go, KERNELGRADER_GPU_KEY=key)
    second = None
    try:
        wait_for_line(log, "A held")
        second = start_lock_worker(tmp_path / "b", log, "shared", "B", go, KERNELGRADER_GPU_KEY=key)
        wait_for_line(log, "B waiting")
        go.touch()
        lines = wait_for_line(log, "B held")
        assert lines.index("A releasing") < lines.index("B held")
        assert first.wait(timeout=60) == 0 and second.wait(timeout=60) == 0
    finally:
        go.touch()
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        for suffix in ("gate", "lock", "wanted"):
            (gpu.host_lock_dir() / f"kernelgrader-gpu-{key}.{suffix}").unlink(missing_ok=True)


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
