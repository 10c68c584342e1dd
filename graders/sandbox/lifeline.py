"""Lifelines: a process group that the kernel kills once the process at the other end is gone.

A sandboxed child holds the read end of a pipe whose write end only its worker holds (`hold`,
armed by graders.sandbox.child): when the worker ends, however it ends, the kernel sends SIGKILL
to the child's process group. No thread of ours has to run for that to happen.

The tools a child starts need the same, one level down. compute-sanitizer runs its program under
a launcher that leaves the tool's process at once and keeps running as a subreaper in the
tool's session, so neither the child's process group nor a parent-death signal (which a fork
clears) reaches the program: seen on an H100, the sanitizer's spares of a stopped service
waited on their FIFOs for good, each holding a CUDA context. So the child hands a FIFO down
(`hand_down`: it keeps the FIFO open for reading and writing for as long as it lives, and names
it in the tool's environment), and the tool's program holds it (`hold_inherited`) as the child
holds its own: when the child goes, the program's whole process group (the launcher with it)
gets SIGKILL.
"""

from __future__ import annotations

import fcntl
import os
import signal
from pathlib import Path

# The environment variable that names a handed-down lifeline to a tool's program.
ENV = "KERNELGRADER_LIFELINE"
_NAME = "lifeline.fifo"
_HELD: dict[Path, int] = {}


def hold(fd: int) -> None:
    """SIGKILL to this process group from the kernel once the pipe's last writer closes; at once
    if it closed before this was armed (the holder died while this process started)."""
    fcntl.fcntl(fd, fcntl.F_SETOWN, -os.getpgrp())
    fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGKILL)
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_ASYNC | os.O_NONBLOCK)
    try:
        ended = os.read(fd, 1) == b""
    except BlockingIOError:
        ended = False  # the holder has its end open: the normal case
    if ended:
        os.killpg(os.getpgrp(), signal.SIGKILL)


def hand_down(folder: Path) -> Path:
    """A FIFO in `folder` that this process keeps open until it ends (once per folder).

    Opened for reading and writing, which on Linux never blocks; the descriptor is
    close-on-exec, so no program this process starts holds the writing end."""
    path = folder / _NAME
    if path not in _HELD:
        if not path.exists():
            os.mkfifo(path, 0o600)
        _HELD[path] = os.open(path, os.O_RDWR)
    return path


def hold_inherited() -> None:
    """In a tool's program: die with the child that named a lifeline in the environment."""
    named = os.environ.get(ENV)
    if named:
        hold(os.open(named, os.O_RDONLY | os.O_NONBLOCK))
