"""The sandboxed child: warm up, read one request from a private pipe, run it, answer on another.

Started only by `graders.sandbox.process.spawn` as

    python -m graders.sandbox.child IN_FD OUT_FD PROGRESS_FD LIFELINE_FD [WARM_TARGET]

First it arms the lifeline (LIFELINE_FD, the read end of a pipe only the worker writes to): the
kernel sends SIGKILL to this child's process group once the worker's end closes, so the child
and whatever it started in its group die with the worker, however the worker ends and whatever
the child is doing (no thread of ours has to run, or to get the GIL, for it to happen). Tools it
starts in sessions of their own hold a lifeline it hands down (graders.sandbox.lifeline).

A prestarted child first runs WARM_TARGET ("pkg.mod:func", called with no arguments: import
CuPy, make the context, load the kernels) and says `{"ready": ...}` on the progress pipe; then
it blocks until the request arrives. The request (`{"target": "pkg.mod:func", "payload": {...},
"limits": {...}}`) and the answer travel as JSON over the pipes named on the command line, never
over stdin/stdout: whatever the target (or a student's kernel, through `printf`) writes to
stdout is only captured text, so it cannot forge a result. The request's limits are applied
before the target runs, so a child started ahead of need is held to the limits of the work it
is finally given. One request per child: it exits after answering.
"""

from __future__ import annotations

import errno
import importlib
import json
import os
import resource
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from graders.sandbox import lifeline, progress, spare_slots
from graders.sandbox.limits import apply_request_limits

# Built before any work starts: after a MemoryError there may be no memory left to build it.
_MEMORY_ERROR = b'{"status": "error", "kind": "resource_limit", "detail": "memory"}'


def _resolve(target: str) -> Callable[..., Any]:
    module_name, sep, func_name = target.partition(":")
    if not sep or not module_name or not func_name:
        raise ValueError(f"sandbox target {target!r} is not of the form 'package.module:function'")
    func = getattr(importlib.import_module(module_name), func_name)
    if not callable(func):
        raise TypeError(f"sandbox target {target!r} is not callable")
    return func  # type: ignore[no-any-return]


def _run(request: dict[str, Any]) -> bytes:
    try:
        value = _resolve(request["target"])(request["payload"])
        if not isinstance(value, dict):
            raise TypeError(f"sandbox target returned {type(value).__name__}, not a dict")
        return json.dumps({"status": "ok", "value": value}).encode()
    except MemoryError:
        return _MEMORY_ERROR
    except OSError as exc:
        if exc.errno == errno.EFBIG:  # Python ignores SIGXFSZ, so RLIMIT_FSIZE shows up here
            return json.dumps(
                {"status": "error", "kind": "resource_limit", "detail": "file_size"}
            ).encode()
        return _internal_error(exc)
    except Exception as exc:
        return _internal_error(exc)


def _internal_error(exc: BaseException) -> bytes:
    return json.dumps(
        {
            "status": "error",
            "kind": "internal",
            "detail": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
        }
    ).encode()


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _warm_up(target: str) -> None:
    began = time.monotonic()
    try:
        _resolve(target)()
        failed = ""
    except Exception as exc:  # the request may still succeed; the worker's log says why
        traceback.print_exc(file=sys.stderr)
        failed = f"{type(exc).__name__}: {exc}"
    progress.report(
        {
            "ready": True,
            "warm_s": round(time.monotonic() - began, 3),
            "cpu_s": round(_cpu_seconds(), 3),
            "warm_failed": failed,
        }
    )


def _take_spare_slot(in_fd: int) -> int | None:
    """A GPU spare waits for one of its GPU's spare slots before it warms up, or until it is
    handed a request (graders.sandbox.spare_slots); the slot's fd, held until the request."""
    lock = spare_slots.lock_of_child()
    if lock is None:
        return None
    began = time.monotonic()
    try:
        slot = spare_slots.take(
            lock, spare_slots.slot_count(), skip=spare_slots.request_waiting(in_fd)
        )
    except OSError as exc:  # the lock folder cannot be used: warm up anyway, as before
        print(f"no spare slot: {exc}", file=sys.stderr)
        return None
    waited = time.monotonic() - began
    if waited >= 0.5:
        progress.report({"spare_slot": slot is not None, "waited_s": round(waited, 3)})
    return slot


def main(argv: list[str]) -> int:
    in_fd, out_fd, progress_fd, lifeline_fd = (int(a) for a in argv[1:5])
    # Anything the target starts (compute-sanitizer, say) must not inherit these channels.
    for fd in (in_fd, out_fd, progress_fd, lifeline_fd):
        os.set_inheritable(fd, False)
    lifeline.hold(lifeline_fd)
    progress.attach(progress_fd)
    warmed = len(argv) > 5 and argv[5] != "-"
    slot = None
    if warmed:
        slot = _take_spare_slot(in_fd)
        _warm_up(argv[5])
    else:
        progress.report({"ready": True, "warm_s": 0.0, "cpu_s": round(_cpu_seconds(), 3)})
    with os.fdopen(in_fd, "rb") as request_pipe:
        request_bytes = request_pipe.read()
    if slot is not None:
        os.close(slot)  # at work now: the slot is for a spare at rest
    if not request_bytes:  # the pool was closed, or the worker went away: nothing to do
        os._exit(0)
    try:
        request = json.loads(request_bytes)
        apply_request_limits(request.get("limits") or {}, cpu_used=_cpu_seconds(), warmed=warmed)
    except Exception as exc:
        answer = _internal_error(exc)
    else:
        answer = _run(request)
    # Output first: once the answer pipe closes, the worker reads what is left in the other
    # pipes and may stop there (graders.sandbox.supervise).
    sys.stdout.flush()
    sys.stderr.flush()
    with os.fdopen(out_fd, "wb") as answer_pipe:
        answer_pipe.write(answer)
    # Skip interpreter teardown: a CUDA context left broken by a kernel can crash in its
    # destructors, and the answer is already delivered.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
