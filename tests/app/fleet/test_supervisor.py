"""`kernelgrader worker --gpus`: one real worker process per GPU, restarted, stopped together.

Without a GPU here the children compile only, but each is started with its own
CUDA_VISIBLE_DEVICES and registers under it, as on a GPU host.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.fleet.supervisor import Supervisor, SupervisorError, parse_gpus
from app.jobs import workers
from app.jobs.models import Worker
from tests.app.grading.test_celery_worker import worker_command


def test_gpus_are_all_or_distinct_indices_and_uuids() -> None:
    assert parse_gpus("0,1") == ["0", "1"]
    assert parse_gpus(" 2 , 0 ") == ["2", "0"]
    assert parse_gpus("GPU-8c7a1d3e-1111-2222-3333-444455556666") == [
        "GPU-8c7a1d3e-1111-2222-3333-444455556666"
    ]
    with pytest.raises(SupervisorError, match="twice"):
        parse_gpus("0,0")
    with pytest.raises(SupervisorError, match="'x' is neither"):
        parse_gpus("0,x")
    with pytest.raises(SupervisorError, match="is neither"):
        parse_gpus("0,,1")


def test_all_means_the_gpus_cuda_visible_devices_allows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3")
    assert parse_gpus("all") == ["1", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(SupervisorError, match="found no NVIDIA GPU"):
        parse_gpus("all")


def wait_until(what: Callable[[], object], seconds: float, proc: subprocess.Popen[str]) -> object:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        assert proc.poll() is None, "the supervisor exited early"
        time.sleep(0.3)
    raise AssertionError(f"not within {seconds} s")


@pytest.mark.slow
def test_one_worker_per_gpu_is_restarted_when_it_dies_and_all_stop_together(
    session: Session,
) -> None:
    since = utcnow()
    supervisor = subprocess.Popen(
        [*worker_command(), "--gpus", "0,1", "--loglevel", "WARNING"],
        env={k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def live() -> dict[str, Worker]:
        session.expire_all()
        rows = session.scalars(
            select(Worker).where(Worker.started_at >= since, Worker.stopped_at.is_(None))
        ).all()
        return {row.gpu: row for row in rows if row.gpu in ("0", "1")}

    output = ""
    killed = None
    try:
        first = wait_until(lambda: len(live()) == 2 and live(), 60, supervisor)
        assert isinstance(first, dict)
        # Each is a process of its own, a child of the supervisor, with its own GPU.
        pids = {gpu: row.pid for gpu, row in first.items()}
        assert len(set(pids.values())) == 2 and supervisor.pid not in pids.values()
        killed = first["0"].name
        os.kill(pids["0"], signal.SIGKILL)
        again = wait_until(
            lambda: (row := live().get("0")) is not None and row.pid != pids["0"] and row,
            60,
            supervisor,
        )
        assert isinstance(again, Worker)
        assert live()["1"].pid == pids["1"], "the other GPU's worker was left alone"
        # The supervisor marked the dead one stopped: it does not read as alive meanwhile.
        session.expire_all()
        dead = session.scalars(select(Worker).where(Worker.name == killed)).one()
        assert dead.stopped_at is not None
        supervisor.send_signal(signal.SIGTERM)
        output, _ = supervisor.communicate(timeout=90)
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            output, _ = supervisor.communicate()
        if killed:
            workers.mark_stopped(killed)  # killed without a word: its row would read as alive
    assert supervisor.returncode == 0, output
    assert "GPU 0: worker pid" in output and "restarting it in 1 s" in output, output
    assert live() == {}, "every worker marked itself stopped"
    for pid in (pids["1"], again.pid):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert "Traceback" not in output, output


def _sandbox_children(pid: int) -> list[int]:
    """The sandbox processes below a worker: its zygotes and the children forked from them, or
    children it started fresh (where no zygote could start)."""
    parents: dict[int, list[int]] = {}
    sandbox = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry.name))
        if b"graders.sandbox." in command:
            sandbox.add(int(entry.name))
    found, below = [], list(parents.get(pid, []))
    while below:
        child = below.pop()
        if child in sandbox:
            found.append(child)
            below.extend(parents.get(child, []))
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


@pytest.mark.slow
def test_a_killed_supervisor_leaves_no_worker_or_child_behind(session: Session) -> None:
    since = utcnow()
    supervisor = subprocess.Popen(
        [*worker_command(), "--gpus", "0,1", "--loglevel", "WARNING"],
        env={k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )

    def ready() -> dict[int, list[int]]:
        """Each GPU's live worker with the children it started ahead of need."""
        session.expire_all()
        rows = session.scalars(
            select(Worker).where(Worker.started_at >= since, Worker.stopped_at.is_(None))
        ).all()
        found = {row.pid: _sandbox_children(row.pid) for row in rows if row.gpu in ("0", "1")}
        return found if len(found) == 2 and all(found.values()) else {}

    everyone: list[int] = []
    try:
        workers = wait_until(ready, 90, supervisor)
        assert isinstance(workers, dict)
        everyone = [p for pid, kids in workers.items() for p in (pid, *kids)]
        supervisor.kill()  # outright: it cannot pass anything on
        supervisor.wait()
        assert _still_running(everyone, 60) == []
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()
        for pid in everyone:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
        session.expire_all()
        for row in session.scalars(select(Worker).where(Worker.started_at >= since)).all():
            if row.stopped_at is None and row.gpu in ("0", "1"):
                workers.mark_stopped(row.name)  # stopped without a word


def _still_running(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_running(p) for p in pids):
        time.sleep(0.2)
    return [p for p in pids if _running(p)]


def test_each_worker_counts_the_gpus_in_the_order_nvml_does(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # The supervisor numbers GPUs as NVML does; CUDA's default order (fastest first) may not.
    show = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['CUDA_DEVICE_ORDER'])"
    monkeypatch.setattr(Supervisor, "command", lambda self: [sys.executable, "-c", show])
    supervisor = Supervisor(["1"], loglevel="WARNING")
    child = supervisor.children[0]
    supervisor.start(child)
    assert child.process is not None and child.process.wait(timeout=60) == 0
    assert capfd.readouterr().out.split() == ["1", "PCI_BUS_ID"]


def test_a_worker_that_keeps_dying_waits_twice_as_long_each_time_up_to_a_minute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forgotten: list[int] = []
    monkeypatch.setattr(Supervisor, "forget", staticmethod(forgotten.append))
    supervisor = Supervisor(["0"], loglevel="info")
    child = supervisor.children[0]
    dead = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    dead.wait(timeout=60)

    def dies_after(seconds: float) -> float:
        """The worker exits `seconds` after it started; the delay before its restart."""
        child.process = dead  # type: ignore[assignment]
        now = child.started + seconds
        supervisor.reap(child, now)
        assert child.process is None
        return child.restart_at - now

    child.started = 1000.0
    delays = [dies_after(1.0) for _ in range(8)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert forgotten == [dead.pid] * 8
    # A worker that ran a minute was stable: its next death starts the doubling again.
    assert dies_after(60.0) == 1.0
    assert dies_after(59.9) == 2.0
