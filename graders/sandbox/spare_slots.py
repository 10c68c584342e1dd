"""Slots for GPU children started ahead of need: a cap per GPU, across every worker of the host.

Each worker keeps its own spares (graders.sandbox.prestart): one run and one sanitizer child
(with three compute-sanitizer programs) per concurrent job. Six services on one H100 held about
75 GPU processes and 47 GB of its memory that way, and every refill warmed up in a crowd (spare
warm-ups of 5 to 27 s, the host's load at 20 on 16 cores). A card of 16 to 24 GB could not even
hold those contexts.

So a GPU spare takes one of the GPU's `KERNELGRADER_GPU_SPARES` slots (6 by default: a run and
a sanitizer child for each of the 3 gradings the host runs at once, graders.run.memory; 0 for no
cap) before it warms up, and holds it until it exits. A slot is an flock on a file beside the
GPU's lock files, so a child that dies gives its slot back.

Nothing waits for ever on a slot:

- a spare that is handed a request while it waits goes on without one (its request is the
  work the slots are for; it warms up then, as a child started for the request would);
- a spare gives its slot back as soon as it is handed its request: the slots count children
  at rest, and the ones at work are capped by the gradings at once;
- a spare that has waited in its pool IDLE_YIELD_S for a request is stopped by its pool when a
  spare of another worker waits for a slot (`wanted_by_others`; graders.sandbox.prestart), so
  an idle service's spares make room for a busy one's; that pool starts a new one at its next
  request. The pool does this, not the spare, so a spare is never handed a request as it
  leaves.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import select
import time
from collections.abc import Callable

from graders.sandbox.isolation import SPARE_OWNER_ENV as OWNER_ENV
from graders.sandbox.isolation import SPARE_SLOTS_ENV as SLOTS_ENV
from graders.timing.lock import GpuLock, flocked

DEFAULT_SLOTS = 6
# A spare idle this long in its pool gives its slot to a waiting one.
IDLE_YIELD_S = 30.0
POLL_S = 0.05


def slot_count() -> int:
    text = os.environ.get(SLOTS_ENV, "")
    return max(0, int(text)) if text.strip().isdigit() else DEFAULT_SLOTS


def lock_of_child() -> GpuLock | None:
    """The GPU's lock as a GPU child's environment names it (graders.sandbox.isolation gives
    it the GPU's key; graders.gpu reads it); None in a child without a GPU."""
    if not os.environ.get("KERNELGRADER_GPU_KEY"):
        return None
    from graders.gpu import gpu_lock

    return gpu_lock()


def _wanted_name(owner: str) -> str:
    return f"spare-wanted-{''.join(c for c in owner if c.isdigit()) or '0'}"


def wanted_by_others(lock: GpuLock, owner: str) -> bool:
    """Whether a spare of another worker than `owner` (isolation.spare_owner) waits for a slot
    of this GPU now."""
    mine = lock.path(_wanted_name(owner)).name
    prefix = lock.path("spare-wanted-").name
    try:
        names = [p for p in lock.folder.iterdir() if p.name.startswith(prefix)]
    except OSError:
        return False
    return any(p.name != mine and flocked(p) for p in names)


def take(
    lock: GpuLock,
    slots: int,
    *,
    skip: Callable[[], bool],
    poll_s: float = POLL_S,
) -> int | None:
    """A slot's file descriptor, its flock held until this process ends (or the fd closes);
    None when there is no cap or `skip()` said to go on without one first."""
    if slots <= 0:
        return None
    fds = [lock.open_file(f"spare-{i}") for i in range(slots)]
    held: int | None = None
    want: int | None = None
    try:
        while True:
            for fd in random.sample(fds, len(fds)):
                with contextlib.suppress(BlockingIOError):
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    held = fd
                    return fd
            if want is None:
                want = lock.open_file(_wanted_name(os.environ.get(OWNER_ENV, "")))
                fcntl.flock(want, fcntl.LOCK_SH)  # blocks only across a probe's instant
            if skip():
                return None
            time.sleep(poll_s)
    finally:
        for fd in fds:
            if fd != held:
                os.close(fd)
        if want is not None:
            os.close(want)


def request_waiting(fd: int) -> Callable[[], bool]:
    """Whether the request pipe `fd` has something to read (the spare was handed out)."""
    return lambda: bool(select.select([fd], [], [], 0)[0])
