"""The sandboxed child: read one request from a private pipe, run the target, answer on another.

Started only by `graders.sandbox.run_sandboxed` as `python -m graders.sandbox.child IN_FD OUT_FD`.
The request (`{"target": "pkg.mod:func", "payload": {...}}`) and the answer travel as JSON over
the two pipes named on the command line, never over stdin/stdout: whatever the target (or a
student's kernel, through `printf`) writes to stdout is only captured text, so it cannot forge
a result.
"""

from __future__ import annotations

import errno
import importlib
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

# Built before any work starts: after a MemoryError there may be no memory left to build it.
_MEMORY_ERROR = b'{"status": "error", "kind": "resource_limit", "detail": "memory"}'


def _resolve(target: str) -> Callable[[dict[str, Any]], Any]:
    module_name, sep, func_name = target.partition(":")
    if not sep or not module_name or not func_name:
        raise ValueError(f"sandbox target {target!r} is not of the form 'package.module:function'")
    func = getattr(importlib.import_module(module_name), func_name)
    if not callable(func):
        raise TypeError(f"sandbox target {target!r} is not callable")
    return func  # type: ignore[no-any-return]


def _run(request_bytes: bytes) -> bytes:
    try:
        request = json.loads(request_bytes)
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


def main(argv: list[str]) -> int:
    in_fd, out_fd = int(argv[1]), int(argv[2])
    # Anything the target starts (compute-sanitizer, say) must not inherit the answer channel.
    os.set_inheritable(in_fd, False)
    os.set_inheritable(out_fd, False)
    with os.fdopen(in_fd, "rb") as request_pipe:
        request_bytes = request_pipe.read()
    answer = _run(request_bytes)
    with os.fdopen(out_fd, "wb") as answer_pipe:
        answer_pipe.write(answer)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: a CUDA context left broken by a kernel can crash in its
    # destructors, and the answer is already delivered.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
