"""The zygote: a process that imported what a sandboxed child needs and never touched CUDA, and
forks every child of its kind.

    python -m graders.sandbox.zygote LIFELINE_FD SOCKET_FD KIND

A worker starts one per kind ("gpu": NumPy, CuPy and the run and sanitizer stages imported;
"cpu": the compile stage and NVRTC's bindings, no CuPy, whose import maps more address space
than a compiler's limit allows) through graders.sandbox.zygotes. A fresh child paid Python,
NumPy, CuPy and the grader's modules every time (about 1 s and 2.8 CPU-s for a run child on an
H200 host); a forked one pays only for its context, made after the fork, so it is its own.

The zygote never initialises CUDA, never starts a thread, and holds no secret: its environment
is a child's (graders.sandbox.isolation.child_env), started with close_fds, and it dies with its
worker by a lifeline of its own (graders.sandbox.lifeline). It talks to its worker over a
SOCK_SEQPACKET socket, one JSON message a packet:

- `spawn` (with six descriptors: request in, answer out, progress out, lifeline, stdout,
  stderr): fork; in the child, everything a fresh child got before it runs (`_become_child`);
  answered `spawned` with the pid, or `failed`;
- `exited` (zygote to worker): a child ended. It is not reaped yet, so its pid, and its process
  group, stay the worker's to kill until the worker says `reap`; then `reaped` answers with its
  wait status and CPU time;
- `status`: its threads, whether CUDA was initialised in it, its open device files (tests).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import resource
import select
import signal
import socket
import sys
import tempfile
import traceback
from typing import Any

from graders.sandbox import lifeline

# What each kind imports ahead, so that a child finds it imported. Nothing here may initialise
# CUDA: `import cupy` and `import cupyx` do not (CuPy makes its context at the first device use).
PRELOAD = {
    "gpu": (
        "numpy",
        "cupy",
        "cupyx",
        "graders.run.child",
        "graders.run.warmup",
        "graders.run.buffers",
        "graders.run.cases",
        "graders.run.judge",
        "graders.run.timed",
        "graders.run.quick",
        "graders.sanitizer.child",
        "graders.sanitizer.target",
        "graders.sanitizer.launcher",
        "graders.nvml",
        "graders.sandbox.child",
    ),
    "cpu": (
        "cupy_backends.cuda.libs.nvrtc",
        "graders.compile.pipeline",
        "graders.compile.compiler",
        "graders.sandbox.child",
    ),
}
MESSAGE_LIMIT = 4 << 20
CHANNELS = 6  # in, answer, progress, lifeline, stdout, stderr
CUDA_ERROR_NOT_INITIALIZED = 3


def preload(kind: str) -> list[str]:
    """Import the kind's modules; the ones that failed, with why (a child imports them itself)."""
    failed = []
    for name in PRELOAD.get(kind, ()):
        try:
            importlib.import_module(name)
        except Exception as exc:  # a CPU-only host without CuPy, say
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
    return failed


def cuda_state() -> str:
    """'not initialised', 'initialised' or 'no driver': asked of the driver without changing it
    (cuDeviceGetCount answers CUDA_ERROR_NOT_INITIALIZED until cuInit has run)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no driver"
    count = ctypes.c_int(0)
    status = cuda.cuDeviceGetCount(ctypes.byref(count))
    return "not initialised" if status == CUDA_ERROR_NOT_INITIALIZED else "initialised"


def device_files(pid: int | str = "self") -> list[str]:
    """The NVIDIA device files a process holds open: a CUDA context (or NVML) opens them."""
    found = []
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("/dev/nvidia"):
                    found.append(target)
    return sorted(found)


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def _become_child(spec: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: what a fresh child got between fork and exec, then its main."""
    from graders.sandbox import child
    from graders.sandbox.isolation import Credentials, make_preexec
    from graders.sandbox.limits import SandboxLimits

    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()  # its own session and process group, as start_new_session gave
    in_r, out_w, progress_w, lifeline_r, stdout_w, stderr_w = fds
    os.dup2(stdout_w, 1)
    os.dup2(stderr_w, 2)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    # Nothing of the zygote's stays open (its socket, its wake-up pipe, its lifeline), nor the
    # spare ends of this child's own channels.
    channels = {in_r, out_w, progress_w, lifeline_r}
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in channels:
            with contextlib.suppress(OSError):
                os.close(fd)
    os.chdir(spec["workdir"])
    os.environ.clear()
    os.environ.update(spec["env"])
    tempfile.tempdir = None  # found again from TMPDIR, the child's own folder
    if spec["gpu"] and "CUPY_CACHE_DIR" in os.environ:
        # CuPy made its cache folder when the zygote imported it; a fresh child's import made
        # its own, in its own folder (the kernel cache's copy may already stand there).
        os.makedirs(os.environ["CUPY_CACHE_DIR"], exist_ok=True)
    creds = Credentials(**spec["creds"]) if spec.get("creds") else None
    limits = SandboxLimits(**spec["limits"])
    make_preexec(limits, bool(spec["gpu"]), int(spec["unshare"]), creds)()
    # What `python -m graders.sandbox.child IN OUT PROGRESS LIFELINE [WARM]` would see.
    sys.argv = [child.__file__ or "child.py", str(in_r), str(out_w), str(progress_w)]
    sys.argv += [str(lifeline_r), *([spec["warm"]] if spec["warm"] else [])]
    child.main(list(sys.argv))


class _Server:
    def __init__(self, sock: socket.socket, kind: str, failed: list[str]) -> None:
        self.sock = sock
        self.kind = kind
        self.failed = failed
        self.children: set[int] = set()
        self.announced: set[int] = set()
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        os.set_blocking(self.wake_r, False)
        self.wake_w = wake_w
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)

    def send(self, message: dict[str, Any]) -> None:
        self.sock.send(json.dumps(message).encode())

    def serve(self) -> None:
        self.send({"op": "ready", "pid": os.getpid(), "threads": _threads(), "failed": self.failed})
        while True:
            ready, _, _ = select.select([self.sock.fileno(), self.wake_r], [], [], 1.0)
            if self.wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(self.wake_r, 4096)
            self._announce_exits()
            if self.sock.fileno() in ready:
                data, fds, _flags, _addr = socket.recv_fds(self.sock, MESSAGE_LIMIT, CHANNELS)
                if not data:
                    for fd in fds:
                        os.close(fd)
                    return  # the worker closed its end
                self._handle(json.loads(data), fds)

    def _announce_exits(self) -> None:
        for pid in sorted(self.children - self.announced):
            try:
                ended = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
            except ChildProcessError:
                ended = True
            if ended:
                self.announced.add(pid)
                self.send({"op": "exited", "pid": pid})

    def _handle(self, message: dict[str, Any], fds: list[int]) -> None:
        op = message.get("op")
        if op == "spawn":
            self._spawn(message, fds)
        elif op == "reap":
            self._reap(int(message["pid"]))
        elif op == "status":
            self.send(
                {
                    "op": "status",
                    "id": message.get("id"),
                    "threads": _threads(),
                    "cuda": cuda_state(),
                    "device_files": device_files(),
                    "children": sorted(self.children),
                }
            )
        for fd in fds if op != "spawn" else ():
            os.close(fd)

    def _spawn(self, message: dict[str, Any], fds: list[int]) -> None:
        ident = message.get("id")
        if len(fds) != CHANNELS:
            for fd in fds:
                os.close(fd)
            self.send({"op": "failed", "id": ident, "error": f"{len(fds)} descriptors sent"})
            return
        if _threads() != 1:
            # A fork copies only this thread; locks another thread held would stay held.
            for fd in fds:
                os.close(fd)
            self.send({"op": "failed", "id": ident, "error": f"{_threads()} threads"})
            return
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            self.send({"op": "failed", "id": ident, "error": f"fork: {exc}"})
            return
        if pid == 0:
            try:
                _become_child(message, fds)
            except BaseException:
                with contextlib.suppress(Exception):
                    traceback.print_exc()
                    sys.stderr.flush()
            os._exit(70)
        for fd in fds:
            os.close(fd)
        self.children.add(pid)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self.send({"op": "spawned", "id": ident, "pid": pid, "inherited_rss_kb": peak})

    def _reap(self, pid: int) -> None:
        reaped: dict[str, Any]
        try:
            _, status, usage = os.wait4(pid, 0)
            reaped = {
                "status": status,
                "utime": usage.ru_utime,
                "stime": usage.ru_stime,
                "maxrss": usage.ru_maxrss,
            }
        except ChildProcessError:
            reaped = {"status": None}
        self.children.discard(pid)
        self.announced.discard(pid)
        self.send({"op": "reaped", "pid": pid, **reaped})

    def close(self) -> None:
        """The worker let go: what is left of the children goes, and is reaped."""
        for pid in self.children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        for pid in self.children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def main(argv: list[str]) -> int:
    lifeline_fd, sock_fd, kind = int(argv[1]), int(argv[2]), argv[3]
    os.set_inheritable(lifeline_fd, False)
    os.set_inheritable(sock_fd, False)
    lifeline.hold(lifeline_fd)
    sock = socket.socket(fileno=sock_fd)
    server = _Server(sock, kind, preload(kind))
    try:
        server.serve()
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
