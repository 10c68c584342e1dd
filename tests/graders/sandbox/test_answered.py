"""A GPU child that has answered is not waited for: its output is already read, its exit (the
driver tearing down a CUDA context) is reaped in the background."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from graders.sandbox import supervise
from graders.sandbox.process import PopenHandle, SandboxProcess
from graders.sandbox.runner import SandboxLimits, run_sandboxed

TARGETS = "graders.sandbox.selftest_targets"
LIMITS = SandboxLimits(wall_seconds=20, cpu_seconds=10, memory_mb=512)


class _Unkillable(SandboxProcess):
    """A real process that `kill_group` leaves alone: it stands for a child whose exit takes
    longer than the answer (the test ends it itself)."""

    def kill_group(self, why: str) -> None:
        self.log.append(f"not killed: {why}")


def _sleeper(gpu: bool) -> _Unkillable:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    return _Unkillable(
        handle=PopenHandle(proc),
        workdir=tempfile.mkdtemp(),
        gpu=gpu,
        warm=None,
        in_w=-1,
        out_r=-1,
        progress_r=-1,
        stdout_r=os.dup(proc.stdout.fileno()),
        stderr_r=os.dup(proc.stderr.fileno()),
        lifeline_w=-1,
        spawned_at=time.monotonic(),
        nproc_limited=False,
    )


def test_an_answered_gpu_child_still_exiting_is_reaped_by_a_thread() -> None:
    child = _sleeper(gpu=True)
    log: list[str] = []
    try:
        began = time.monotonic()
        status, rusage = supervise._end(child, log, answered=time.monotonic())
        assert time.monotonic() - began < 5  # returned without waiting for the 60 s sleep
        assert (status, rusage) == (None, None)
        assert any("not waited for" in line for line in log), log
        assert child.handle.returncode is None
    finally:
        os.kill(child.pid, 9)
    for _ in range(100):
        if child.handle.returncode is not None:
            break
        time.sleep(0.05)
    assert child.handle.returncode == -9  # the reaper's wait4, not the test's
    assert not os.path.exists(f"/proc/{child.pid}")  # reaped: no zombie left behind


def test_a_cpu_child_or_one_that_never_answered_is_waited_for() -> None:
    for gpu, answered in ((False, time.monotonic()), (True, None)):
        child = _sleeper(gpu=gpu)
        log: list[str] = []
        killer = subprocess.Popen(
            [sys.executable, "-c", f"import os, time; time.sleep(0.5); os.kill({child.pid}, 9)"]
        )
        status, _ = supervise._end(child, log, answered=answered)
        killer.wait()
        assert status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9
        assert child.handle.returncode == -9
        assert not any("not waited for" in line for line in log), log


def test_output_printed_before_the_answer_is_all_read_from_a_gpu_child() -> None:
    lines = 2000  # 200 kB: more than a pipe holds; the target leaves it in its buffer
    outcome = run_sandboxed(f"{TARGETS}:print_unflushed", {"lines": lines}, limits=LIMITS, gpu=True)
    assert outcome.ok, outcome
    assert outcome.value == {"printed": True}
    assert outcome.stdout_total == lines * 100
