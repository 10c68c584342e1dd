"""No process of a killed worker stays on the GPU: its children die with it, and what an older
worker left is reaped when the next one starts. nvidia-smi's list is printed before and after
(run with -s to see it); NVML, or nvidia-smi, is what the assertions read.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graders.gpu import gpu_process_ids

ROOT = Path(__file__).resolve().parents[3]

# A worker: one GPU child, which takes GPU memory and keeps it; the worker says the child's
# pid once the memory is held, then waits to be killed.
_WORKER = """
import json, os, sys, time
from graders.sandbox.limits import SandboxLimits
from graders.sandbox.process import spawn
child = spawn(limits=SandboxLimits(wall_seconds=600, cpu_seconds=600, memory_mb=8192), gpu=True)
request = {"target": "graders.sandbox.selftest_targets:hold_gpu_memory",
           "payload": {"mb": 512}, "limits": {}}
os.write(child.in_w, json.dumps(request).encode())
os.close(child.in_w)
printed = os.fdopen(child.stdout_r, "rb")
for _ in range(1000):
    if printed.readline().startswith(b"holding"):
        break
print(child.pid, child.workdir, flush=True)
time.sleep(600)
"""

# A leftover of an older worker, without a lifeline: a process of its own session that holds
# GPU memory in a sandbox folder whose worker is gone.
_LEFTOVER = """
import sys, time
import cupy
held = cupy.ones(128 * 1024 * 1024, dtype=cupy.float32)
cupy.cuda.Device().synchronize()
print("holding", flush=True)
time.sleep(600)
"""


def _smi(when: str) -> None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        print(f"{when}: no nvidia-smi here")
        return
    query = [exe, "--query-compute-apps=pid,process_name,used_memory", "--format=csv"]
    listed = subprocess.run(query, capture_output=True, text=True, timeout=30, check=False)
    print(f"nvidia-smi {when}:\n{listed.stdout.strip()}")


def _on_gpu(pid: int) -> bool:
    running = gpu_process_ids()
    assert running is not None, "neither NVML nor nvidia-smi can list the GPU's processes here"
    return pid in running


def _off_gpu_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _on_gpu(pid):
            return True
        time.sleep(0.2)
    return not _on_gpu(pid)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.gpu
def test_a_killed_workers_gpu_child_leaves_the_gpu() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    worker = subprocess.Popen(
        [sys.executable, "-c", _WORKER], env=env, stdout=subprocess.PIPE, text=True
    )
    child_pid = None
    try:
        assert worker.stdout is not None
        child_pid = int(worker.stdout.readline().split()[0])
        _smi("before the worker is killed")
        assert _on_gpu(child_pid), "the child holding GPU memory is not listed (pid namespace?)"
        worker.kill()
        worker.wait()
        assert _off_gpu_within(child_pid, 60)
        _smi("after")
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        if child_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child_pid, signal.SIGKILL)


@pytest.mark.gpu
def test_a_leftover_on_the_gpu_is_reaped_when_a_worker_starts(tmp_path: Path) -> None:
    from app.grading.sandbox_cleanup import reap_orphaned_sandboxes

    folder = tmp_path / f"kg-sandbox-{_dead_pid()}-left"
    folder.mkdir()
    leftover = subprocess.Popen(
        [sys.executable, "-c", _LEFTOVER],
        cwd=folder,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert leftover.stdout is not None
        assert leftover.stdout.readline().startswith("holding")
        _smi("before the worker starts")
        assert _on_gpu(leftover.pid), "the leftover is not listed (pid namespace?)"
        reaped = reap_orphaned_sandboxes(tmp_path)
        assert [p.pid for p in reaped.killed] == [leftover.pid]
        assert _off_gpu_within(leftover.pid, 60)
        assert reaped.removed == [folder]
        _smi("after")
    finally:
        if leftover.poll() is None:
            leftover.kill()
        leftover.wait()


# A worker with a sanitizer spare ready (three compute-sanitizer tools, each with its program
# waiting on a FIFO, as a service keeps them); it prints the spare's folder and waits.
_SANITIZER_WORKER = """
import sys, time
from pathlib import Path
from graders.sandbox import prestart
pool = prestart.configure(prestart.PoolSpec(
    "sanitizer", gpu=True, warm="graders.sanitizer.child:warm_up", spares=1), fill=False)
pool.fill()
spare = pool._spares[0]
for _ in range(1200):  # its programs say they are ready once their CUDA contexts are made
    if len(list(Path(spare.workdir).glob("ready-*"))) == 3:
        break
    time.sleep(0.1)
print(spare.workdir, flush=True)
time.sleep(600)
"""


def _working_in(folder: Path) -> list[int]:
    """The pids of live processes whose working directory is `folder`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            here = Path(os.readlink(entry / "cwd")) == folder
            if here and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                pids.append(int(entry.name))
    return pids


@pytest.mark.gpu
def test_a_killed_workers_sanitizer_spare_leaves_the_gpu() -> None:
    """compute-sanitizer's launcher outlives the spare's child; its programs must not."""
    from graders.sanitizer.tool import executable

    if executable() is None:
        pytest.skip("compute-sanitizer is not installed here")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    worker = subprocess.Popen(
        [sys.executable, "-c", _SANITIZER_WORKER], env=env, stdout=subprocess.PIPE, text=True
    )
    folder: Path | None = None
    try:
        assert worker.stdout is not None
        folder = Path(worker.stdout.readline().strip())
        tools = _working_in(folder)
        on_gpu = [p for p in tools if _on_gpu(p)]
        _smi("before the worker is killed")
        assert len(on_gpu) == 3, (tools, on_gpu)  # one program per tool holds a context
        worker.kill()
        worker.wait()
        assert all(_off_gpu_within(p, 60) for p in on_gpu)
        deadline = time.monotonic() + 30
        while _working_in(folder) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _working_in(folder) == []  # the launchers went with their programs
        _smi("after")
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        for pid in _working_in(folder) if folder is not None else []:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
