"""One GPU, one clock: worker processes with data folders of their own, naming the GPU one by
its index and one by its UUID, take the same timing lock (NVML, or nvidia-smi, names it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from graders import gpu
from tests.graders.test_gpu import start_lock_worker, wait_for_line


@pytest.mark.gpu
def test_two_workers_of_one_gpu_with_their_own_data_folders_share_its_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KERNELGRADER_GPU_KEY", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    uuid = gpu.gpu_key()
    assert uuid.startswith(("GPU-", "MIG-")), f"neither NVML nor nvidia-smi named GPU 0: {uuid}"
    print(f"GPU 0 is {uuid}; its lock folder {gpu.lock_dir()}")
    log, go = tmp_path / "log", tmp_path / "go"
    first = start_lock_worker(tmp_path / "a", log, "exclusive", "A", go, CUDA_VISIBLE_DEVICES="0")
    second = None
    try:
        wait_for_line(log, "A held")
        second = start_lock_worker(
            tmp_path / "b", log, "shared", "B", go, CUDA_VISIBLE_DEVICES=uuid
        )
        wait_for_line(log, "B waiting")  # its exclusive hold keeps B out
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
