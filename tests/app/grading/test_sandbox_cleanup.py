"""Sandbox folders of killed workers are removed at the next worker start; live ones stay,
and so do those in which a child the killed worker left still runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from app.grading.sandbox_cleanup import owner_pid, remove_orphaned_sandboxes
from graders.sandbox.runner import SandboxLimits, run_sandboxed


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_only_folders_whose_owner_is_gone_are_removed(tmp_path: Path) -> None:
    dead = _dead_pid()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        folders = {
            "dead sandbox": tmp_path / f"kg-sandbox-{dead}-abc",
            "dead run": tmp_path / f"kernelgrader-run-{dead}-def",
            "live sandbox": tmp_path / f"kg-sandbox-{alive.pid}-ghi",
            "this process": tmp_path / f"kernelgrader-run-{os.getpid()}-jkl",
            "no owner in the name": tmp_path / "kg-sandbox-mno",
            "an older grader's, all digits": tmp_path / f"kg-sandbox-{dead}",
            "not ours": tmp_path / f"other-{dead}-pqr",
        }
        for folder in folders.values():
            folder.mkdir()
            (folder / "progress-0.jsonl").write_text("{}")
        removed = remove_orphaned_sandboxes(tmp_path)
    finally:
        alive.kill()
        alive.wait()
    assert sorted(removed) == sorted([folders["dead sandbox"], folders["dead run"]])
    assert {name for name, f in folders.items() if f.exists()} == {
        "live sandbox",
        "this process",
        "no owner in the name",
        "an older grader's, all digits",
        "not ours",
    }


def test_the_grader_names_its_sandbox_after_the_worker_process() -> None:
    limits = SandboxLimits(wall_seconds=20, cpu_seconds=10, memory_mb=512)
    outcome = run_sandboxed("graders.sandbox.selftest_targets:workdir_info", {}, limits=limits)
    assert outcome.ok, outcome.message
    assert owner_pid(Path(outcome.value["cwd"]).name) == os.getpid()


# A worker that starts a sandboxed child, gives it a request that keeps it busy, says where
# the child works, and waits to be killed: the child lives on in a session of its own.
_WORKER = """
import json, os, sys, time
from graders.sandbox.limits import SandboxLimits
from graders.sandbox.process import spawn
child = spawn(limits=SandboxLimits(wall_seconds=120, cpu_seconds=60, memory_mb=512), gpu=False)
request = {"target": "graders.sandbox.selftest_targets:scripted",
           "payload": {"actions": [{"sleep": 60}]}, "limits": {}}
os.write(child.in_w, json.dumps(request).encode())
os.close(child.in_w)
print(child.pid, child.workdir, flush=True)
time.sleep(120)
"""


def test_a_live_child_of_a_killed_worker_keeps_its_folder(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    worker = subprocess.Popen(
        [sys.executable, "-c", _WORKER], env=env, stdout=subprocess.PIPE, text=True
    )
    child_pid = None
    try:
        assert worker.stdout is not None
        child_pid, workdir = worker.stdout.readline().split()
        child_pid, folder = int(child_pid), Path(workdir)
        assert owner_pid(folder.name) == worker.pid
        worker.kill()  # the worker is killed mid-job; its child goes on
        worker.wait()
        assert _running(child_pid)
        # The next worker's start: the owner is gone, but a live process works in the folder.
        assert remove_orphaned_sandboxes(tmp_path) == []
        assert folder.is_dir()
        os.killpg(child_pid, signal.SIGKILL)  # its own session, started by the worker above
        for _ in range(200):
            if not _running(child_pid):
                break
            time.sleep(0.05)
        assert remove_orphaned_sandboxes(tmp_path) == [folder]
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        if child_pid is not None and _running(child_pid):
            os.killpg(child_pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"
