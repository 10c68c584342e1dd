"""The zygotes children are forked from: they never initialise CUDA and never start a thread, a
child's context is made after the fork (its own), and a zygote that dies takes its running
children with it and is replaced. Real processes; the GPU tests need a GPU."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from graders.sandbox import zygotes
from graders.sandbox.limits import SandboxLimits
from graders.sandbox.process import SandboxProcess, spawn
from graders.sandbox.runner import run_sandboxed
from graders.sandbox.zygote import device_files
from tests.graders.sandbox.test_lifeline import _gone_within, _running

ROOT = Path(__file__).resolve().parents[3]
TARGETS = "graders.sandbox.selftest_targets"
LIMITS = SandboxLimits(wall_seconds=30, cpu_seconds=10, memory_mb=512)


@pytest.fixture
def forked() -> Iterator[None]:
    zygotes.enable()
    yield
    zygotes.disable()


@pytest.mark.usefixtures("forked")
def test_a_zygote_runs_one_thread_and_never_touched_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELGRADER_SECRET_KEY", "no-zygote-may-see-this")
    for kind in ("cpu", "gpu"):
        zygote = zygotes.current(kind)
        assert zygote is not None, kind
        status = zygote.status()
        assert status["threads"] == 1, status
        assert status["cuda"] in ("not initialised", "no driver"), status
        assert status["device_files"] == [] == device_files(zygote.pid), status
    if zygote.info.get("failed"):  # a host without CuPy: the GPU zygote imports what it can
        pytest.skip(f"the GPU zygote could not import: {zygote.info['failed']}")
    # What it imported for its children is there, and nothing of the worker's: its
    # environment is a child's.
    environ = Path(f"/proc/{zygote.pid}/environ").read_bytes()
    assert b"no-zygote-may-see-this" not in environ
    assert b"OPENBLAS_NUM_THREADS=1" in environ


@pytest.mark.usefixtures("forked")
def test_a_dead_zygote_takes_its_running_children_and_is_replaced() -> None:
    first = zygotes.current("cpu")
    assert first is not None
    began = time.monotonic()
    killer = subprocess.Popen(
        [sys.executable, "-c", f"import os, time; time.sleep(2); os.kill({first.pid}, 9)"]
    )
    outcome = run_sandboxed(
        f"{TARGETS}:scripted", {"actions": [{"sleep": 25}]}, limits=LIMITS
    )  # a child of that zygote, at work when it dies
    killer.wait()
    assert not outcome.ok and outcome.reason == "crashed", (outcome.reason, outcome.log)
    assert time.monotonic() - began < 20  # killed with its zygote, not left to its limit
    assert not _running(outcome.pid)
    again = run_sandboxed(f"{TARGETS}:echo", {}, limits=LIMITS)
    assert again.ok, again.log
    second = zygotes.current("cpu")
    assert second is not None and second.pid != first.pid
    assert any(f"(pid {second.pid})" in line for line in again.log), again.log


def test_without_zygotes_children_start_fresh() -> None:
    zygotes.disable()
    outcome = run_sandboxed(f"{TARGETS}:echo", {}, limits=LIMITS)
    assert outcome.ok
    assert not any("zygote" in line for line in outcome.log), outcome.log


def _ready(child: SandboxProcess, limit_s: float = 120.0) -> dict[str, object]:
    """The child's "ready" progress record: its warm-up is done."""
    buffer = b""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        buffer += os.read(child.progress_r, 65536)
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            record = json.loads(line)
            if record.get("ready"):
                return dict(record)
    raise AssertionError("the child never got ready")


@pytest.mark.gpu
@pytest.mark.usefixtures("forked")
def test_each_forked_child_makes_its_own_context_after_the_fork() -> None:
    from graders.gpu import gpu_process_ids

    limits = SandboxLimits(wall_seconds=120, cpu_seconds=60, memory_mb=4096)
    children = [spawn(limits=limits, gpu=True, warm=f"{TARGETS}:warm_context") for _ in range(2)]
    try:
        for child in children:
            assert not _ready(child).get("warm_failed"), child.log
        zygote = zygotes.current("gpu")
        assert zygote is not None
        assert all(any("zygote" in line for line in c.log) for c in children)
        status = zygote.status()
        assert status["cuda"] == "not initialised" and status["device_files"] == [], status
        on_gpu = gpu_process_ids()
        assert on_gpu is not None
        assert {c.pid for c in children} <= on_gpu, (on_gpu, [c.pid for c in children])
        assert zygote.pid not in on_gpu
        for child in children:  # each holds the driver's files itself
            assert device_files(child.pid), child.pid
    finally:
        for child in children:
            child.discard()


@pytest.mark.gpu
@pytest.mark.usefixtures("forked")
def test_a_forked_gpu_child_compiles_into_its_own_cache_folder() -> None:
    limits = SandboxLimits(wall_seconds=120, cpu_seconds=60, memory_mb=4096)
    outcome = run_sandboxed(f"{TARGETS}:kernel_cache_probe", {}, limits=limits, gpu=True)
    assert outcome.ok, (outcome.reason, outcome.log)
    assert any("zygote" in line for line in outcome.log), outcome.log
    value = outcome.value
    assert value["folder"] == os.path.join(value["cwd"], ".cupy"), value
    assert value["files"], value  # the new kernel went there, not to the zygote's folder


# A worker with a GPU spare forked from its zygote, the spare holding its context.
_WORKER = """
import json, os, sys, time
from graders.sandbox import zygotes
from graders.sandbox.limits import SandboxLimits
from graders.sandbox.process import spawn
zygotes.enable()
spare = spawn(limits=SandboxLimits(wall_seconds=600, cpu_seconds=600, memory_mb=8192), gpu=True,
              warm="graders.sandbox.selftest_targets:warm_context")
buffer = b""
while b'"ready"' not in buffer:
    buffer += os.read(spare.progress_r, 65536)
print(spare.pid, zygotes.current("gpu").pid, flush=True)
time.sleep(600)
"""


@pytest.mark.gpu
def test_a_forked_gpu_spare_and_its_zygote_die_with_their_worker() -> None:
    from graders.gpu import gpu_process_ids

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    worker = subprocess.Popen(
        [sys.executable, "-c", _WORKER], env=env, stdout=subprocess.PIPE, text=True
    )
    pids: list[int] = []
    try:
        assert worker.stdout is not None
        pids = [int(p) for p in worker.stdout.readline().split()]
        assert len(pids) == 2, pids
        spare, zygote = pids
        assert spare in (gpu_process_ids() or set())  # its context, made before any request
        worker.kill()
        worker.wait()
        assert _gone_within(pids, 20) == []
        deadline = time.monotonic() + 30
        while spare in (gpu_process_ids() or set()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert spare not in (gpu_process_ids() or set())
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        for pid in pids:
            if _running(pid):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
