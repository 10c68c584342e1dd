"""`kernelgrader worker --gpus`: one worker process per GPU, each restarted when it dies.

Each child is an ordinary `kernelgrader worker` that sees one GPU (CUDA_VISIBLE_DEVICES), so
it registers, routes and takes its timing lock for that GPU alone. The supervisor holds no
CUDA state: it starts, watches and stops the children, and marks a child that died without a
word stopped in the registry, so the fleet's pages do not show it alive until it goes silent.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from types import FrameType

from app.jobs.gpu_probe import cannot_compile_sentence, compile_unavailable_reason
from app.jobs.workers import mark_stopped

log = logging.getLogger("kernelgrader.supervisor")

# A child that dies sooner than this after its start counts as failing again: its restart
# waits 1 s, 2 s, 4 s ... up to MAX_BACKOFF_S. One that ran longer restarts after 1 s.
STABLE_AFTER_S = 60.0
MAX_BACKOFF_S = 60.0
# After SIGTERM the children finish the job in hand (Celery's warm shutdown); past this they
# are killed, and the sweeper sends the job again.
STOP_GRACE_S = 120.0
_GPU_ID = re.compile(r"^(\d+|(GPU|MIG)-[0-9A-Za-z-]+)$")


class SupervisorError(Exception):
    """The --gpus request cannot be served; the message says why and what to do."""


def visible_gpus() -> list[str]:
    """The GPUs `--gpus all` means: those CUDA_VISIBLE_DEVICES allows, else every GPU found."""
    allowed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if allowed is not None:
        return [part.strip() for part in allowed.split(",") if part.strip()]
    try:
        import pynvml

        pynvml.nvmlInit()
        return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
    except Exception:
        pass
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    count = sum(1 for line in listed.stdout.splitlines() if line.startswith("GPU "))
    return [str(i) for i in range(count)]


def parse_gpus(spec: str) -> list[str]:
    """'all' or a comma-separated list of GPU indices (or GPU-/MIG- UUIDs), in order."""
    text = spec.strip()
    if text.lower() == "all":
        found = visible_gpus()
        if not found:
            raise SupervisorError(
                "--gpus all found no NVIDIA GPU on this host (neither NVML nor nvidia-smi "
                "lists one); name the GPUs (--gpus 0,1), or start `kernelgrader worker` "
                "without --gpus to compile only."
            )
        return found
    gpus = [part.strip() for part in text.split(",")]
    for gpu in gpus:
        if not _GPU_ID.match(gpu):
            raise SupervisorError(
                f"--gpus takes 'all' or GPU indices such as 0,1 (or GPU UUIDs); "
                f"'{gpu or spec}' is neither."
            )
    repeated = sorted({gpu for gpu in gpus if gpus.count(gpu) > 1})
    if repeated:
        raise SupervisorError(
            f"--gpus names GPU {', '.join(repeated)} twice; one worker per GPU keeps its "
            "timings apart, so name each GPU once."
        )
    return gpus


@dataclass
class Child:
    gpu: str
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    failures: int = 0
    restart_at: float = 0.0


class Supervisor:
    def __init__(self, gpus: list[str], *, loglevel: str) -> None:
        self.children = [Child(gpu) for gpu in gpus]
        self.loglevel = loglevel
        self.stopping = threading.Event()
        self.kill = threading.Event()

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "app.cli",
            "worker",
            "--loglevel",
            self.loglevel,
            "--parent-pid",
            str(os.getpid()),
        ]

    def start(self, child: Child) -> None:
        # The GPUs are numbered as NVML numbers them (visible_gpus), so CUDA must count them in
        # the same order: the worker's GPU, and the timing lock it takes, are then the same one.
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": child.gpu, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
        # A session of its own: a terminal's Ctrl-C reaches the supervisor, which forwards it
        # once, rather than every process at the same time.
        child.process = subprocess.Popen(self.command(), env=env, start_new_session=True)
        child.started = time.monotonic()
        log.info("GPU %s: started worker pid %s", child.gpu, child.process.pid)

    def reap(self, child: Child, now: float) -> None:
        assert child.process is not None
        code = child.process.returncode
        ran = now - child.started
        child.failures = 1 if ran >= STABLE_AFTER_S else child.failures + 1
        delay = min(MAX_BACKOFF_S, 2.0 ** (child.failures - 1))
        child.restart_at = now + delay
        log.warning(
            "GPU %s: worker pid %s exited with code %s after %.0f s; restarting it in %.0f s",
            child.gpu,
            child.process.pid,
            code,
            ran,
            delay,
        )
        self.forget(child.process.pid)
        child.process = None

    @staticmethod
    def forget(pid: int) -> None:
        try:
            mark_stopped(f"{socket.gethostname()}:{pid}")
        except Exception:  # the registry's heartbeat timeout covers it
            log.exception("could not mark the dead worker pid %s stopped", pid)

    def signal_children(self, signum: int) -> None:
        for child in self.children:
            if child.process is not None and child.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.process.send_signal(signum)

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self.stopping.is_set():
            self.kill.set()  # asked twice: stop now
            return
        log.info("stopping: sending %s to the workers", signal.Signals(signum).name)
        self.stopping.set()
        self.signal_children(signal.SIGTERM)

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)
        log.info("supervising one worker per GPU: %s", ", ".join(c.gpu for c in self.children))
        while not self.stopping.is_set():
            now = time.monotonic()
            for child in self.children:
                if child.process is None:
                    if now >= child.restart_at and not self.stopping.is_set():
                        self.start(child)
                elif child.process.poll() is not None:
                    self.reap(child, now)
            self.stopping.wait(0.5)
        # Forwarded in on_signal; again here for a child started while the signal arrived.
        self.signal_children(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while any(c.process is not None and c.process.poll() is None for c in self.children):
            if self.kill.is_set() or time.monotonic() > deadline:
                log.warning("workers still running; killing them")
                self.signal_children(signal.SIGKILL)
            time.sleep(0.2)
        log.info("all workers stopped")
        return 0


def supervise(spec: str, *, loglevel: str = "INFO") -> int:
    """Start and watch one worker per GPU until SIGTERM or SIGINT; the exit code."""
    gpus = parse_gpus(spec)
    missing = compile_unavailable_reason()
    if missing is not None:
        raise SupervisorError(cannot_compile_sentence(missing))
    return Supervisor(gpus, loglevel=loglevel).run()
