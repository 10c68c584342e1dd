"""The per-GPU lock: timed sections alone on the GPU, everything else may share it.

A reader-writer lock across every process of the host, built from two `flock`ed files:

- `shared` (correctness runs, the sanitizer, a child's warm-up): any number at once;
- `exclusive` (a timed section): alone, once the shared holders before it have finished.

Fairness comes from a gate file that both kinds pass through in turn. A writer keeps the gate
while it waits for the readers to drain, so a reader that comes later queues behind it instead
of overtaking it for ever; the writer lets go of the gate once it holds the lock, so the readers
queued behind it run as soon as it is done. The kernel drops an flock when its holder dies, so
a child killed in the middle never leaves the GPU locked.

`on_wait` is called before blocking and `on_held` once the lock is held: the run child tells
its parent through them, and the parent stops the child's clock while it waits.

A writer also holds a third file, `wanted`, shared, from before the gate until it holds the
lock: `writer_waiting()` asks for it alone without blocking, so a long shared holder that can
stop and come back later (a profile, graders.profile.target) sees a timed section waiting and
lets go at once, rather than keeping it waiting for tens of seconds.

A fourth file, `profiler`, is a plain mutex beside all that (`profiler()`): one Nsight Compute
session at a time on the GPU. ncu keeps its own such lock in the temporary folder, which every
sandboxed child has its own of, and two sessions at once end without a report.

Every process that takes the lock leaves its pid in the lock's `users` folder: while a timed
section holds the lock alone, none of them can be running, so a busy process on the GPU that is
not among them is work the lock does not cover (graders.timing.contention).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

Callback = Callable[[], None] | None


def _take(fd: int, mode: int, on_wait: Callback, waited: list[bool]) -> None:
    """flock `fd`; call `on_wait` once (over both files) if it has to block."""
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    if not waited[0]:
        waited[0] = True
        if on_wait is not None:
            on_wait()
    fcntl.flock(fd, mode)


_registered: set[tuple[str, int]] = set()


def flocked(path: Path) -> bool:
    """Whether some process holds an flock on `path` now, asked without waiting (a file that
    is missing or may not be opened: no)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing lets go of the probe's own hold, if it got one
    return False


def file_key(key: str) -> str:
    """A GPU's key as it goes into the names of its files here: letters, digits, - and _."""
    return "".join(c for c in key if c.isalnum() or c in "-_") or "gpu"


class GpuLock:
    """The host-wide lock of one GPU; `key` names the GPU (see graders.gpu.gpu_key)."""

    def __init__(self, directory: Path | str, key: str) -> None:
        self.folder = Path(directory)
        self.key = file_key(key)

    @property
    def users_folder(self) -> Path:
        return self.folder / f"kernelgrader-gpu-{self.key}.users"

    def _register(self) -> None:
        """Leave this process's pid among the lock's users (once per process and folder)."""
        mark = (str(self.users_folder), os.getpid())
        if mark in _registered:
            return
        with contextlib.suppress(OSError):
            self.users_folder.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                os.chmod(self.users_folder, 0o1777)
            (self.users_folder / str(os.getpid())).touch()
            _registered.add(mark)

    def users(self) -> set[int]:
        """The pids of the processes that took this lock (some may have ended since)."""
        try:
            return {int(p.name) for p in self.users_folder.iterdir() if p.name.isdigit()}
        except OSError:
            return set()

    def path(self, suffix: str) -> Path:
        return self.folder / f"kernelgrader-gpu-{self.key}.{suffix}"

    def open_file(self, suffix: str) -> int:
        """One of this GPU's files beside the lock (`suffix` names it), made readable and writable
        by all (workers may be different users).

        An existing file is opened without O_CREAT: in a sticky world-writable folder the
        kernel refuses O_CREAT on another user's file (fs.protected_regular). flock needs no
        write access, so a file this user may only read still serves.
        """
        path = self.path(suffix)
        for _ in range(3):
            for mode in (os.O_RDWR, os.O_RDONLY):
                try:
                    return os.open(path, mode)
                except FileNotFoundError:
                    break
                except PermissionError:
                    continue
            else:
                raise PermissionError(f"cannot open the GPU lock file {path}")
            self.folder.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                continue  # another process made it just now: open theirs
            os.fchmod(fd, 0o666)  # past the umask
            return fd
        raise FileExistsError(f"the GPU lock file {path} keeps coming and going")

    @contextlib.contextmanager
    def _hold(self, mode: int, on_wait: Callback, on_held: Callback) -> Iterator[float]:
        start = time.perf_counter()
        waited = [False]
        # Fresh open files each time: flock belongs to the open file, so two threads of one
        # process take turns like two processes do.
        wanted = self.open_file("wanted") if mode == fcntl.LOCK_EX else None
        gate, lock = self.open_file("gate"), self.open_file("lock")
        try:
            if wanted is not None:
                fcntl.flock(wanted, fcntl.LOCK_SH)  # blocks only across a probe's instant
            _take(gate, fcntl.LOCK_EX, on_wait, waited)
            try:
                _take(lock, mode, on_wait, waited)
            finally:
                fcntl.flock(gate, fcntl.LOCK_UN)
                if wanted is not None:
                    os.close(wanted)
                    wanted = None
            self._register()
            if on_held is not None:
                on_held()
            yield time.perf_counter() - start
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(lock, fcntl.LOCK_UN)
            os.close(gate)
            os.close(lock)
            if wanted is not None:
                os.close(wanted)

    def writer_waiting(self) -> bool:
        """Whether an exclusive holder (a timed section) is waiting for the lock now."""
        return flocked(self.path("wanted"))

    def shared(
        self, on_wait: Callback = None, on_held: Callback = None
    ) -> contextlib.AbstractContextManager[float]:
        """Held beside other shared holders, never beside an exclusive one; yields the wait."""
        return self._hold(fcntl.LOCK_SH, on_wait, on_held)

    def exclusive(
        self, on_wait: Callback = None, on_held: Callback = None
    ) -> contextlib.AbstractContextManager[float]:
        """Held alone; yields the seconds waited for it."""
        return self._hold(fcntl.LOCK_EX, on_wait, on_held)

    @contextlib.contextmanager
    def profiler(self, until: float, give_up: Callable[[], bool] | None = None) -> Iterator[bool]:
        """The GPU's profiler, for one session at a time; yields whether it is held, False once
        `until` (time.monotonic) passed or `give_up()` said so first."""
        fd = self.open_file("profiler")
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    held = True
                    break
                except BlockingIOError:
                    if time.monotonic() >= until or (give_up is not None and give_up()):
                        held = False
                        break
                    time.sleep(0.05)
            yield held
        finally:
            os.close(fd)  # and with it the flock
