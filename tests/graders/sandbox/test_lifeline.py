"""Sandboxed children die with their worker, however it dies (real processes, no GPU).

A worker process starts a busy child (which starts a grandchild of its own) and a spare from a
short-lived thread, as the prestart pools do; the test kills the worker with SIGKILL and
watches every one of them go. Bounded waits, never timings.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graders.sandbox import lifeline
from graders.sandbox.runner import SandboxLimits, run_sandboxed

ROOT = Path(__file__).resolve().parents[3]

# A worker: a busy child whose request starts a grandchild, and a spare started ahead of need
# by a thread that has ended by the time the pids are printed.
_WORKER = """
import json, os, sys, threading, time
from graders.sandbox import prestart, zygotes
from graders.sandbox.limits import SandboxLimits
from graders.sandbox.process import spawn
if sys.argv[1] == "forked":
    zygotes.enable()

busy = spawn(limits=SandboxLimits(wall_seconds=120, cpu_seconds=60, memory_mb=512), gpu=False)
request = {"target": "graders.sandbox.selftest_targets:sleep_with_grandchild",
           "payload": {}, "limits": {}}
os.write(busy.in_w, json.dumps(request).encode())
os.close(busy.in_w)
grandchild = None
printed = os.fdopen(busy.stdout_r, "rb")
for _ in range(200):
    line = printed.readline().decode()
    if line.startswith("grandchild-pid="):
        grandchild = int(line.split("=")[1])
        break
pool = prestart.configure(prestart.PoolSpec(
    "spare", gpu=False, warm="graders.sandbox.selftest_targets:warm_up", spares=1), fill=False)
filler = threading.Thread(target=pool.fill)
filler.start()
filler.join()
spare = pool._spares[0]
time.sleep(1)  # the thread that started the spare is gone; the spare must live on
zygote = zygotes.current("cpu")
print(busy.pid, grandchild, spare.pid, *([zygote.pid] if zygote else []), flush=True)
time.sleep(120)
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _gone_within(pids: list[int], seconds: float) -> list[int]:
    """The pids still running after up to `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_running(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if _running(p)]


@pytest.mark.parametrize("kind", ["fresh", "forked"])
def test_children_and_their_children_die_with_a_killed_worker(kind: str) -> None:
    """Forked children die with their worker too, and so does the zygote they came from."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    worker = subprocess.Popen(
        [sys.executable, "-c", _WORKER, kind], env=env, stdout=subprocess.PIPE, text=True
    )
    pids: list[int] = []
    try:
        assert worker.stdout is not None
        pids = [int(p) for p in worker.stdout.readline().split()]
        assert len(pids) == (4 if kind == "forked" else 3), pids
        # Alive while their worker is, the spare too though the thread that started it ended.
        assert all(_running(p) for p in pids), pids
        worker.kill()
        worker.wait()
        assert _gone_within(pids, 20) == []
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        for pid in pids:  # each leads a session of its own (the grandchild is in the child's)
            if _running(pid):
                os.killpg(os.getpgid(pid), signal.SIGKILL)


_LATE = """
import os, sys
from graders.sandbox.lifeline import hold
r, w = os.pipe()
os.close(w)  # the worker is gone before the child armed its lifeline
hold(r)
print("survived", flush=True)
"""


def test_a_child_whose_worker_died_before_it_armed_the_lifeline_ends_at_once() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _LATE],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,  # it kills its own process group
    )
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stdout, done.stderr)
    assert "survived" not in done.stdout


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.usefixtures("child_kind")
def test_a_finished_child_leaves_no_lifeline_open_in_the_worker() -> None:
    limits = SandboxLimits(wall_seconds=20, cpu_seconds=10, memory_mb=512)
    target = "graders.sandbox.selftest_targets:echo"
    run_sandboxed(target, {}, limits=limits)  # whatever a first run opens for good
    before = _open_fds()
    for _ in range(3):
        assert run_sandboxed(target, {"n": 1}, limits=limits).ok
    assert _open_fds() == before


# A sandboxed child that starts a tool the way compute-sanitizer runs its program: the tool in a
# session of its own, the program forked by a launcher that leaves at once (so the program's
# parent is not the child, and nothing of the child's group or a parent-death signal reaches
# it). The program holds the lifeline the child handed down, or not (argv[1]).
_TOOL_CHILD = """
import os, subprocess, sys, time
from pathlib import Path
from graders.sandbox import lifeline
env = {**os.environ, lifeline.ENV: str(lifeline.hand_down(Path.cwd()))}
program = '''
import os, sys, time
from graders.sandbox import lifeline
if os.fork():
    os._exit(0)  # the launcher leaves; the program lives on in the tool's session
if sys.argv[1] == "hold":
    lifeline.hold_inherited()
print(os.getpid(), flush=True)
time.sleep(120)
'''
tool = subprocess.Popen([sys.executable, "-c", program, sys.argv[1]], env=env,
                        stdout=subprocess.PIPE, text=True, start_new_session=True)
print(tool.stdout.readline().strip(), flush=True)
time.sleep(120)
"""


def _start_tool_child(tmp_path: Path, how: str) -> tuple[subprocess.Popen[str], int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", _TOOL_CHILD, how],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    return child, int(child.stdout.readline())


def _stop(child: subprocess.Popen[str], program: int) -> None:
    if child.poll() is None:
        child.kill()
        child.wait()
    if _running(program):
        os.killpg(os.getpgid(program), signal.SIGKILL)


def test_a_tools_program_dies_with_the_child_that_handed_it_a_lifeline(tmp_path: Path) -> None:
    child, program = _start_tool_child(tmp_path, "hold")
    try:
        assert _running(program)
        child.kill()
        child.wait()
        assert _gone_within([program], 20) == []
    finally:
        _stop(child, program)


def test_without_the_lifeline_such_a_program_outlives_its_child(tmp_path: Path) -> None:
    """The shape the lifeline is for: the child's death alone does not end the program."""
    child, program = _start_tool_child(tmp_path, "no")
    try:
        child.kill()
        child.wait()
        time.sleep(1)
        assert _running(program)
    finally:
        _stop(child, program)


def test_a_program_whose_child_is_already_gone_ends_at_once(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    holder = subprocess.run(
        [sys.executable, "-c", "from pathlib import Path; from graders.sandbox import lifeline; "
         "print(lifeline.hand_down(Path.cwd()))"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    env[lifeline.ENV] = holder.stdout.strip()
    done = subprocess.run(
        [sys.executable, "-c", "from graders.sandbox import lifeline; lifeline.hold_inherited(); "
         "print('survived', flush=True)"],
        env=env, capture_output=True, text=True, timeout=60, start_new_session=True,
    )  # fmt: skip
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stdout, done.stderr)
    assert "survived" not in done.stdout
