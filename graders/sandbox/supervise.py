"""Watching a sandboxed child through its one request: pipes, clocks, and the kill.

The parent writes the request, then reads four pipes until the child is gone: the answer, the
progress channel, stdout (a student's printf: kept up to a cap, the rest read and dropped so a
flood cannot stall the child) and stderr (the child's own warnings and tracebacks: for the
worker's log only, capped too).

Clocks: the wall-clock limit counts from when the child is ready for its request (a prestarted
child's warm-up never counts); while the child says it waits for the GPU's lock, neither the
wall clock nor a step's clock runs. A step (`{"step": name, "limit_s": x}`) has its own limit,
so a kernel whose printf the driver expands for minutes ends at its case's limit. Either limit
passed means SIGKILL to the child's whole process group.

Printing has limits of its own (SandboxLimits.print_limit_bytes and print_limit_seconds): a
child that printed more, or kept printing longer, is killed the same way and said to have been
stopped for printing, whatever its clocks say.

A GPU child is not waited for once it has answered: its output is flushed before its answer
(graders.sandbox.child), so when the answer pipe closes and the other pipes have nothing more
to read, what it had to say is here. Its end (the driver tearing down its CUDA context: 0.1 s
for a run child, measured on an H100) is reaped by a thread of its own, and the grading goes
on meanwhile.
"""

from __future__ import annotations

import json
import os
import resource
import selectors
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from graders.sandbox.limits import SandboxLimits
from graders.sandbox.process import SandboxProcess, note_cpu

ProgressCallback = Callable[[dict[str, Any]], None]

# The answer of a grading step is small JSON; anything bigger is a broken or hostile child.
ANSWER_LIMIT_BYTES = 64 * 1024 * 1024
STDERR_LIMIT_BYTES = 64 * 1024
PROGRESS_LINE_LIMIT = 16 * 1024 * 1024
# How the lines of a child's log about its warm-up and its end begin: the run and sanitizer
# stages pass those lines on to the worker's log.
READY = "ready:"
EXITED = "exited:"
# After the child exits, how long we wait for its pipes to close before giving up on them.
DRAIN_SECONDS = 1.0
# A prestarted child that is still not ready this long after its request is broken.
READY_LIMIT_SECONDS = 180.0
# Output chunks closer together than this belong to one burst of printing.
PRINT_GAP_S = 0.1


@dataclass
class Finished:
    """How the child's one request went, before anyone judged it."""

    status: int | None  # None: an answered GPU child, reaped later (its status not known)
    rusage: resource.struct_rusage | None
    answer: bytes
    answer_overflow: bool
    stdout: bytes
    stdout_total: int
    stderr: str
    timed_out: bool
    stopped_step: str  # the step whose own limit passed; "" for the wall clock or none
    never_ready: bool
    # "bytes" or "seconds" when the child was killed for printing past that limit; else "".
    stopped_printing: str
    printing_seconds: float  # how long output kept coming (its bursts, added up)
    seconds: float  # from the request to the end, lock waits included
    warm_cpu_s: float
    log: list[str] = field(default_factory=list)


class _Clock:
    """A deadline that stands still while the child waits for the lock."""

    def __init__(self) -> None:
        self.deadline: float | None = None
        self.step: tuple[str, float] | None = None
        self.paused_at: float | None = None

    def pause(self, now: float) -> None:
        if self.paused_at is None:
            self.paused_at = now

    def resume(self, now: float) -> None:
        if self.paused_at is None:
            return
        gap = now - self.paused_at
        self.paused_at = None
        if self.deadline is not None:
            self.deadline += gap
        if self.step is not None:
            self.step = (self.step[0], self.step[1] + gap)

    def expired(self, now: float) -> tuple[bool, str]:
        if self.paused_at is not None:
            return False, ""
        if self.step is not None and now >= self.step[1]:
            return True, self.step[0]
        if self.deadline is not None and now >= self.deadline:
            return True, ""
        return False, ""


class _Printing:
    """How much, and for how long, the child has printed; whether that is past its limits."""

    def __init__(self, limits: SandboxLimits) -> None:
        self.limits = limits
        self.total = 0
        self.seconds = 0.0
        self.last: float | None = None

    def feed(self, size: int, now: float) -> str:
        """Count a chunk; the limit it passed ("bytes", "seconds") or ""."""
        self.total += size
        if self.last is not None and now - self.last <= PRINT_GAP_S:
            self.seconds += now - self.last
        self.last = now
        if self.total > self.limits.print_limit_bytes:
            return "bytes"
        if self.seconds > self.limits.print_limit_seconds:
            return "seconds"
        return ""


class _Progress:
    """Splits the progress pipe into records and acts on the ones about clocks."""

    def __init__(
        self,
        clock: _Clock,
        limits: SandboxLimits,
        callback: ProgressCallback | None,
        deadline_on_ready: bool,
    ) -> None:
        self.clock = clock
        self.deadline_on_ready = deadline_on_ready
        self.limits = limits
        self.callback = callback
        self.buffer = bytearray()
        self.ready = False
        self.warm_cpu_s = 0.0
        self.log: list[str] = []

    def feed(self, chunk: bytes, now: float) -> None:
        self.buffer.extend(chunk)
        while b"\n" in self.buffer:
            line, _, rest = bytes(self.buffer).partition(b"\n")
            self.buffer = bytearray(rest)
            self._record(line, now)
        if len(self.buffer) > PROGRESS_LINE_LIMIT:
            self.log.append("a progress line was too long; dropped")
            self.buffer.clear()

    def _record(self, line: bytes, now: float) -> None:
        try:
            record = json.loads(line)
        except ValueError:
            self.log.append("a progress line was not JSON; dropped")
            return
        if not isinstance(record, dict):
            return
        if record.get("ready") and not self.ready:
            self.ready = True
            self.warm_cpu_s = float(record.get("cpu_s") or 0.0)
            if self.deadline_on_ready:
                self.clock.deadline = now + self.limits.wall_seconds
            self.log.append(f"{READY} warm-up took {record.get('warm_s')} s")
            if record.get("warm_failed"):
                self.log.append(f"warm-up failed: {record['warm_failed']}")
        if "spare_slot" in record:
            got = "took" if record.get("spare_slot") else "was handed its request before"
            self.log.append(f"waited {record.get('waited_s')} s for a spare slot, then {got} one")
        if record.get("lock") == "wait":
            self.clock.pause(now)
        elif record.get("lock") == "held":
            self.clock.resume(now)
        if "step" in record:
            limit = record.get("limit_s")
            self.clock.step = (str(record["step"]), now + float(limit)) if limit else None
        if self.callback is not None:
            self.callback(record)


def supervise(
    child: SandboxProcess,
    request: bytes,
    limits: SandboxLimits,
    on_progress: ProgressCallback | None = None,
) -> Finished:
    """Hand `request` to `child` and watch it until it is gone; see the module docstring."""
    began = time.monotonic()
    log = child.log
    clock = _Clock()
    progress = _Progress(clock, limits, on_progress, deadline_on_ready=child.warm is not None)
    if child.warm is None:
        # A child started for this request: its start-up counts, as it always has.
        clock.deadline = child.spawned_at + limits.wall_seconds
    stdout_fd, stderr_fd = child.stdout_r, child.stderr_r
    in_w = child.in_w
    for fd in (in_w, child.out_r, child.progress_r, stdout_fd, stderr_fd):
        os.set_blocking(fd, False)
    sel = selectors.DefaultSelector()
    sel.register(in_w, selectors.EVENT_WRITE)
    for fd in (child.out_r, child.progress_r, stdout_fd, stderr_fd):
        sel.register(fd, selectors.EVENT_READ)
    pending = memoryview(request)
    answer = bytearray()
    answer_overflow = False
    stdout_buf = bytearray()
    printing = _Printing(limits)
    stderr_buf = bytearray()
    drain_deadline: float | None = None
    timed_out = False
    stopped_step = ""
    stopped_printing = ""
    never_ready = False
    answered: float | None = None  # when the answer pipe closed: the answer is whole
    try:
        while sel.get_map():
            now = time.monotonic()
            if drain_deadline is None:
                expired, step = clock.expired(now)
                if not progress.ready and now - began > READY_LIMIT_SECONDS:
                    never_ready = True
                    child.kill_group("it never got ready for its request")
                    drain_deadline = now + DRAIN_SECONDS
                elif expired:
                    timed_out, stopped_step = True, step
                    what = f"the limit of step {step}" if step else "the wall-clock limit"
                    child.kill_group(f"{what} of {limits.wall_seconds:g} s")
                    drain_deadline = now + DRAIN_SECONDS
                elif child.has_exited():
                    # Whatever it left behind in its group goes too, so the pipes reach EOF.
                    child.kill_group("the child exited; this ends anything it left behind")
                    drain_deadline = now + DRAIN_SECONDS
            if drain_deadline is not None and now >= drain_deadline:
                log.append("pipes still open after the child ended; stopped reading them")
                break
            events = sel.select(timeout=0.02)
            if not events and answered is not None and child.gpu and drain_deadline is None:
                break  # answered, and nothing more to read: its exit is not waited for
            for key, _ in events:
                fd = key.fd
                if fd == in_w:
                    try:
                        written = os.write(in_w, pending[:65536])
                        pending = pending[written:]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(in_w)
                        os.close(in_w)
                        in_w = child.in_w = -1
                    continue
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(fd)
                    if fd == child.out_r:
                        answered = time.monotonic()
                    continue
                if fd == child.out_r:
                    if len(answer) + len(chunk) > ANSWER_LIMIT_BYTES:
                        answer_overflow = True
                    else:
                        answer.extend(chunk)
                elif fd == child.progress_r:
                    progress.feed(chunk, time.monotonic())
                elif fd == stdout_fd:
                    room = limits.stdout_limit_bytes - len(stdout_buf)
                    if room > 0:
                        stdout_buf.extend(chunk[:room])
                    passed = printing.feed(len(chunk), time.monotonic())
                    if passed and drain_deadline is None:
                        stopped_printing = passed
                        child.kill_group(
                            f"it printed past the limit of {_print_limit(limits, passed)}"
                        )
                        drain_deadline = time.monotonic() + DRAIN_SECONDS
                else:
                    room = STDERR_LIMIT_BYTES - len(stderr_buf)
                    if room > 0:
                        stderr_buf.extend(chunk[:room])
    finally:
        sel.close()
        for fd in (in_w, child.out_r, child.progress_r):
            if fd >= 0:
                os.close(fd)
        child.in_w = child.out_r = child.progress_r = -1
        status, rusage = _end(child, log, answered)
    log.extend(progress.log)
    return Finished(
        status=status,
        rusage=rusage,
        answer=bytes(answer),
        answer_overflow=answer_overflow,
        stdout=bytes(stdout_buf),
        stdout_total=printing.total,
        stderr=stderr_buf.decode("utf-8", errors="replace"),
        timed_out=timed_out,
        stopped_step=stopped_step,
        never_ready=never_ready,
        stopped_printing=stopped_printing,
        printing_seconds=printing.seconds,
        seconds=time.monotonic() - began,
        warm_cpu_s=progress.warm_cpu_s,
        log=log,
    )


def _end(
    child: SandboxProcess, log: list[str], answered: float | None
) -> tuple[int | None, resource.struct_rusage | None]:
    """SIGKILL to the child's group, then its status and usage; an answered GPU child that has
    not exited yet is reaped by a thread instead, and (None, None) returned at once."""
    child.kill_group("cleanup")
    ended = child.handle.reap(block=not (answered is not None and child.gpu))
    if ended is None:
        log.append(f"{EXITED} not waited for after its answer (reaped in the background)")
        threading.Thread(target=_reap, args=(child,), name="reap", daemon=True).start()
        return None, None
    _close(child)
    if answered is not None:
        log.append(f"{EXITED} {time.monotonic() - answered:.3f} s after its answer")
    note_cpu(child.role, ended[1])
    return ended


def _reap(child: SandboxProcess) -> None:
    ended = child.handle.reap(block=True)
    _close(child)
    note_cpu(child.role, ended[1] if ended else None)


def _close(child: SandboxProcess) -> None:
    child.cut_lifeline()
    child.close_output()


def _print_limit(limits: SandboxLimits, which: str) -> str:
    if which == "bytes":
        return f"{limits.print_limit_bytes} bytes"
    return f"{limits.print_limit_seconds:g} s of printing"
