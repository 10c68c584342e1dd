"""Compile targets that crash as NVRTC does on some files (glibc's `malloc(): invalid size`
aborts the process), for the compile stage's retry test. The sandboxed child imports them by
name, with the repository root on its path."""

from __future__ import annotations

import os
from typing import Any


def abort(payload: dict[str, Any]) -> dict[str, Any]:
    """Abort on every attempt, as NVRTC does on a file it cannot compile."""
    os.abort()


def abort_on_the_first_attempt(payload: dict[str, Any]) -> dict[str, Any]:
    """Abort on the first attempt only (a crash of the machine's, not the file's)."""
    if payload.get("attempt", 1) == 1:
        os.abort()
    from graders.compile.pipeline import compile_in_child

    return compile_in_child(payload)
