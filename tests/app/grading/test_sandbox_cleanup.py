"""What killed workers left is reaped at the next worker start: the processes still working in
their sandbox folders are stopped (their groups too), then the folders removed; live workers'
folders and someone's shell stay. Real processes; bounded waits, never timings."""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from app.grading.sandbox_cleanup import owner_pid, reap_orphaned_sandboxes
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
        reaped = reap_orphaned_sandboxes(tmp_path)
    finally:
        alive.kill()
        alive.wait()
    assert reaped.killed == []
    assert sorted(reaped.removed) == sorted([folders["dead sandbox"], folders["dead run"]])
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
# the child works, and waits to be killed.
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


def test_a_killed_workers_child_dies_with_it_and_its_folder_goes(tmp_path: Path) -> None:
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
        worker.kill()  # mid-job
        worker.wait()
        assert _gone_within([child_pid], 20) == []
        reaped = reap_orphaned_sandboxes(tmp_path)
        assert reaped.killed == [] and reaped.removed == [folder]
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        if child_pid is not None and _running(child_pid):
            os.killpg(child_pid, signal.SIGKILL)


# A child left by a worker without a lifeline (an older grader, or one that escaped it): it
# leads a session of its own, works in its worker's folder, and started a grandchild that
# works elsewhere but stays in its group.
_LEFTOVER = """
import subprocess, sys, time
grandchild = subprocess.Popen(["sleep", "300"], cwd="/")
print(grandchild.pid, flush=True)
time.sleep(300)
"""


def _start_leftover(folder: Path, **kw: object) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _LEFTOVER],
        cwd=folder,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
        **kw,  # type: ignore[call-overload]
    )
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def test_a_leftover_still_working_is_stopped_with_its_group_then_its_folder_goes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / f"kg-sandbox-{_dead_pid()}-left"
    folder.mkdir()
    leftover, grandchild = _start_leftover(folder, start_new_session=True)
    try:
        assert _running(leftover.pid) and _running(grandchild)
        with caplog.at_level(logging.WARNING, logger="app.grading.sandbox_cleanup"):
            reaped = reap_orphaned_sandboxes(tmp_path)
        assert [p.pid for p in reaped.killed] == [leftover.pid]
        assert leftover.wait(timeout=20) == -signal.SIGKILL
        assert _gone_within([grandchild], 20) == []
        assert reaped.removed == [folder] and not folder.exists()
        assert f"stopped process {leftover.pid} (group {leftover.pid}" in caplog.text
    finally:
        for pid in (leftover.pid, grandchild):
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
        leftover.wait()


def test_a_shell_in_a_dead_workers_folder_is_left_alone(tmp_path: Path) -> None:
    folder = tmp_path / f"kg-sandbox-{_dead_pid()}-shell"
    folder.mkdir()
    primary, secondary = os.openpty()

    def with_terminal() -> None:  # as a login shell has one
        os.setsid()
        fcntl.ioctl(secondary, termios.TIOCSCTTY, 0)

    shell, grandchild = _start_leftover(folder, preexec_fn=with_terminal)
    try:
        reaped = reap_orphaned_sandboxes(tmp_path, wait_s=0)
        assert reaped.killed == [] and reaped.kept == [folder]
        assert _running(shell.pid) and folder.is_dir()
    finally:
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()
        _gone_within([grandchild], 20)
        os.close(primary)
        os.close(secondary)


def test_a_pid_used_again_by_a_later_process_does_not_keep_a_folder(tmp_path: Path) -> None:
    later = subprocess.Popen(["sleep", "60"])
    try:
        folder = tmp_path / f"kg-sandbox-{later.pid}-old"
        folder.mkdir()
        an_hour_ago = time.time() - 3600
        os.utime(folder, (an_hour_ago, an_hour_ago))  # made before that process started
        assert reap_orphaned_sandboxes(tmp_path).removed == [folder]
    finally:
        later.kill()
        later.wait()


def _gone_within(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_running(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if _running(p)]


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"
