"""The child's side of the progress channel: a pipe of JSON lines to the parent, never stdout.

Grader code inside a sandboxed child calls `report(...)` to tell the parent what it is doing:
a case started or finished, a phase began, a step with its own time limit, a wait for the
GPU's lock. The parent (graders.sandbox.supervise) hands every record to its caller, pauses the
child's clocks while it waits for the lock, and kills it when a step runs past its limit.

Only the grader's Python code holds the pipe: a kernel has no system calls, and what it prints
goes to stdout, which the parent treats as text.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

_fd: int | None = None


def attach(fd: int | None) -> None:
    """Called by the child's main with the pipe's write end (None: progress goes nowhere)."""
    global _fd
    _fd = fd


def report(record: dict[str, Any]) -> None:
    """Send one record; a parent that stopped reading must not stop the grading."""
    if _fd is None:
        return
    data = (json.dumps(record, allow_nan=False, default=str) + "\n").encode()
    try:
        while data:
            written = os.write(_fd, data)
            data = data[written:]
    except OSError:
        attach(None)


def step(name: str, limit_s: float | None) -> None:
    """A step that must end within `limit_s` seconds (of time not spent waiting for the lock)."""
    report({"step": name, "limit_s": limit_s})


def lock_callbacks(what: str) -> tuple[Callable[[], None], Callable[[], None]]:
    """`on_wait` and `on_held` for graders.timing.lock: the parent stops the clock between."""
    return (
        lambda: report({"lock": "wait", "for": what}),
        lambda: report({"lock": "held", "for": what}),
    )
