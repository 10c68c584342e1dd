"""A worker whose parent (`serve`, or `worker --gpus`) is gone stops, and its sandboxed children
with it, even when its job in hand would not let it stop. Real processes, bounded waits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# A stand-in for a worker that is busy: SIGTERM (Celery's warm shutdown) does not end it. It
# watches its parent, as `kernelgrader worker --parent-pid` does, and holds a sandboxed child.
_WORKER = """
import json, os, signal, sys, time
from app.fleet.parent import watch_parent
from graders.sandbox.limits import SandboxLimits
from graders.sandbox.process import spawn
signal.signal(signal.SIGTERM, lambda *_: None)  # a job in hand goes on
child = spawn(limits=SandboxLimits(wall_seconds=120, cpu_seconds=60, memory_mb=512), gpu=False)
watch_parent(os.getppid(), grace_s=1, poll_s=0.05)
print(os.getpid(), child.pid, flush=True)
time.sleep(300)
"""

# Its parent: starts it, passes on its pids, and waits to be killed.
_PARENT = """
import subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE,
                          text=True)
print(worker.stdout.readline().strip(), flush=True)
time.sleep(300)
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_a_worker_whose_parent_was_killed_stops_and_its_children_with_it() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, _WORKER],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    pids: list[int] = []
    try:
        assert parent.stdout is not None
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(_running(p) for p in pids), pids
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(_running(p) for p in pids):
            time.sleep(0.05)
        assert not any(_running(p) for p in pids)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in pids:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
