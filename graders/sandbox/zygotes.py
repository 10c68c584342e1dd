"""The worker's zygotes (graders.sandbox.zygote): one per kind of child, started once, asked for
every child of that kind.

`enable()` (the worker's engine, graders' tests) turns them on for this process; until then, and
wherever a zygote cannot start or has died, graders.sandbox.process starts a fresh interpreter
per child as before, and says so in the log. A zygote that dies is started again at the next
child, at most once per RESTART_PAUSE_S.

A forked child is the zygote's child, not the worker's: the worker learns that it ended from the
zygote (`exited`), may still kill its process group then (the zygote does not reap it before the
worker asks, so the pid stays the worker's), and gets its wait status and CPU time by asking
(`ForkedHandle.reap`). If the zygote dies, its children's groups are killed at once: nobody could
say when they end.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from graders.sandbox.isolation import WORKDIR_PREFIX, child_env

log = logging.getLogger(__name__)

KINDS = ("gpu", "cpu")
READY_LIMIT_S = 180.0
ANSWER_LIMIT_S = 60.0
RESTART_PAUSE_S = 10.0
MESSAGE_LIMIT = 4 << 20
OFF_ENV = "KERNELGRADER_ZYGOTES"


class ZygoteUnavailable(RuntimeError):
    """The zygote could not start a child (it is gone, or refused); the caller starts one fresh."""


def usage(utime: float, stime: float, maxrss: int) -> resource.struct_rusage:
    """A struct_rusage with the fields the runner reads (CPU seconds, peak memory)."""
    return resource.struct_rusage((utime, stime, maxrss) + (0,) * 13)


class ForkedHandle:
    """A child a zygote forked: whether it ended, and its status, come from the zygote."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.zygote = zygote
        self.pid = pid
        self.returncode: int | None = None
        self._exited = threading.Event()
        self._reaped = threading.Event()
        self._asked = False
        self._lock = threading.Lock()
        self.status: int | None = None
        self.rusage: resource.struct_rusage | None = None

    def exited(self) -> bool:
        return self._exited.is_set()

    def reap(self, *, block: bool) -> tuple[int, resource.struct_rusage | None] | None:
        """(wait status, usage) once the child ended and the zygote reaped it; None while it
        runs (block=False)."""
        if not self._exited.is_set():
            if not block:
                return None
            self._exited.wait()
        with self._lock:
            ask = not self._asked and not self._reaped.is_set()
            self._asked = True
        if ask:
            # A zygote gone meanwhile marks every child of its own as reaped (Zygote._lost).
            with contextlib.suppress(ZygoteUnavailable):
                self.zygote.send({"op": "reap", "pid": self.pid})
        self._reaped.wait()
        assert self.status is not None
        return self.status, self.rusage

    def _ended(self) -> None:
        self._exited.set()

    def _done(self, status: int | None, rusage: resource.struct_rusage | None) -> None:
        # A child the zygote could not wait for (it is gone) reads as killed.
        self.status = status if status is not None else signal.SIGKILL
        self.rusage = rusage
        self.returncode = os.waitstatus_to_exitcode(self.status)
        self._exited.set()
        self._reaped.set()


class Zygote:
    """One zygote process and the thread that reads what it says."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.gone = False
        self._send_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._next = 0
        self._answers: dict[Any, dict[str, Any]] = {}
        self._waiting: dict[Any, threading.Event] = {}
        self._handles: dict[int, ForkedHandle] = {}
        self._ready = threading.Event()
        self.info: dict[str, Any] = {}
        self.workdir = tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-zygote-")
        env = child_env(self.workdir, kind == "gpu")
        # CuPy reads its cache folder when imported; relative, it is each forked child's own
        # (graders.sandbox.isolation gives every GPU child `<its folder>/.cupy`).
        env["CUPY_CACHE_DIR"] = ".cupy"
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        lifeline_r, self._lifeline_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "graders.sandbox.zygote",
                    str(lifeline_r),
                    str(theirs.fileno()),
                    kind,
                ],
                cwd=self.workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(lifeline_r, theirs.fileno()),
                start_new_session=True,
            )
        except OSError as exc:
            os.close(self._lifeline_w)
            ours.close()
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise ZygoteUnavailable(f"the {kind} zygote could not start: {exc}") from exc
        finally:
            os.close(lifeline_r)
            theirs.close()
        self.sock = ours
        self._reader = threading.Thread(target=self._read, name=f"zygote-{kind}", daemon=True)
        self._reader.start()
        if not self._ready.wait(READY_LIMIT_S) or self.gone:
            self.close()
            raise ZygoteUnavailable(f"the {kind} zygote did not get ready")
        if self.info.get("threads") != 1:
            self.close()
            raise ZygoteUnavailable(
                f"the {kind} zygote runs {self.info.get('threads')} threads; forking it is unsafe"
            )
        for failure in self.info.get("failed") or []:
            log.info("the %s zygote did not import %s", kind, failure)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, message: dict[str, Any], fds: list[int] | None = None) -> None:
        data = json.dumps(message).encode()
        with self._send_lock:
            if self.gone:
                raise ZygoteUnavailable(f"the {self.kind} zygote is gone")
            try:
                if fds:
                    socket.send_fds(self.sock, [data], fds)
                else:
                    self.sock.send(data)
            except OSError as exc:
                raise ZygoteUnavailable(f"the {self.kind} zygote is gone: {exc}") from exc

    def _ask(self, message: dict[str, Any], fds: list[int] | None = None) -> dict[str, Any]:
        with self._state_lock:
            self._next += 1
            ident = message.get("id", self._next)
            message = {**message, "id": ident}
            event = self._waiting[ident] = threading.Event()
        try:
            self.send(message, fds)
            if not event.wait(ANSWER_LIMIT_S) or ident not in self._answers:
                raise ZygoteUnavailable(f"the {self.kind} zygote did not answer")
            return self._answers.pop(ident)
        finally:
            with self._state_lock:
                self._waiting.pop(ident, None)

    def spawn(self, spec: dict[str, Any], fds: list[int]) -> tuple[ForkedHandle, int]:
        """A child forked with `spec` and the six channel descriptors (the caller closes its
        copies); (its handle, the peak memory it inherited, KiB)."""
        answer = self._ask({"op": "spawn", **spec}, fds)
        if answer.get("op") != "spawned":
            raise ZygoteUnavailable(f"the {self.kind} zygote refused: {answer.get('error')}")
        handle = self._handles[int(answer["pid"])]
        return handle, int(answer.get("inherited_rss_kb") or 0)

    def status(self) -> dict[str, Any]:
        """Its threads, whether CUDA was initialised in it, its device files (for tests)."""
        return self._ask({"op": "status", "id": "status"})

    def _read(self) -> None:
        try:
            while True:
                data = self.sock.recv(MESSAGE_LIMIT)
                if not data:
                    break
                self._dispatch(json.loads(data))
        except (OSError, ValueError) as exc:
            log.warning("the %s zygote's channel failed: %s", self.kind, exc)
        self._lost()

    def _dispatch(self, message: dict[str, Any]) -> None:
        op = message.get("op")
        if op == "ready":
            self.info = message
            self._ready.set()
        elif op == "exited":
            handle = self._handles.get(int(message["pid"]))
            if handle is not None:
                handle._ended()
        elif op == "reaped":
            pid = int(message["pid"])
            handle = self._handles.pop(pid, None)
            if handle is not None:
                status = message.get("status")
                rusage = None
                if status is not None:
                    rusage = usage(message["utime"], message["stime"], message["maxrss"])
                handle._done(status, rusage)
        else:
            if op == "spawned":
                pid = int(message["pid"])
                self._handles[pid] = ForkedHandle(self, pid)
            ident = message.get("id")
            with self._state_lock:
                event = self._waiting.get(ident)
                if event is not None:
                    self._answers[ident] = message
                    event.set()

    def _lost(self) -> None:
        """The zygote is gone: its children are killed (nobody can tell when they end)."""
        with self._send_lock:
            self.gone = True
        self._ready.set()
        with self._state_lock:
            for event in self._waiting.values():
                event.set()
        for pid, handle in list(self._handles.items()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            handle._done(None, None)
        self._handles.clear()

    def close(self) -> None:
        """Let the zygote go: it kills and reaps what is left of its children, then ends."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self._lifeline_w >= 0:
            os.close(self._lifeline_w)
            self._lifeline_w = -1
        self.sock.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


_lock = threading.Lock()
_enabled = False
_zygotes: dict[str, Zygote] = {}
_failed_at: dict[str, float] = {}


def enable(*, start: tuple[str, ...] = ()) -> None:
    """Fork this process's sandboxed children from zygotes; start those of `start` now.
    KERNELGRADER_ZYGOTES=0 keeps a fresh interpreter per child (nothing is forked)."""
    global _enabled
    if os.environ.get(OFF_ENV, "").strip().lower() in ("0", "false", "no", "off"):
        log.info("%s is off: every sandboxed child starts a fresh interpreter", OFF_ENV)
        return
    with _lock:
        _enabled = True
    for kind in start:
        current(kind)


def disable() -> None:
    """Back to a fresh interpreter per child; the zygotes end."""
    global _enabled
    with _lock:
        _enabled = False
        zygotes = list(_zygotes.values())
        _zygotes.clear()
        _failed_at.clear()
    for zygote in zygotes:
        zygote.close()


def enabled() -> bool:
    return _enabled


def current(kind: str) -> Zygote | None:
    """The live zygote of `kind`, started if need be; None when zygotes are off or it cannot
    start (logged; tried again after RESTART_PAUSE_S)."""
    with _lock:
        if not _enabled:
            return None
        zygote = _zygotes.get(kind)
        if zygote is not None and not zygote.gone:
            return zygote
        if zygote is not None:
            _zygotes.pop(kind, None)
            log.warning("the %s zygote (pid %s) died; starting another", kind, zygote.pid)
            with contextlib.suppress(Exception):
                zygote.close()
        if time.monotonic() - _failed_at.get(kind, -RESTART_PAUSE_S) < RESTART_PAUSE_S:
            return None
        try:
            zygote = Zygote(kind)
        except ZygoteUnavailable as exc:
            _failed_at[kind] = time.monotonic()
            log.warning("children of kind %s start fresh: %s", kind, exc)
            return None
        _zygotes[kind] = zygote
        log.info("the %s zygote is ready (pid %s)", kind, zygote.pid)
        return zygote
