"""Text a student may read: decoded leniently, without control bytes or host paths, capped.

Every message and log that leaves the engine for a student (compile logs, a kernel's printed
output, sanitizer findings) goes through `visible_text` once, where it is produced, so a byte
that is not UTF-8, an escape sequence or a megabyte of output cannot break or flood a page,
and the worker's folders (site-packages, the data dir, /tmp, /root) are never shown.
"""

from __future__ import annotations

import re

# About what a page can show; a longer log is cut with a note saying how much was cut.
VISIBLE_LIMIT_BYTES = 64 * 1024

# C0 controls but tab and newline, DEL, and the C1 controls (ESC sequences, BEL, backspace...).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# An absolute path of at least two parts, up to white space or a quote; linear: no nesting.
_HOST_PATH = re.compile(r"(?<![\w./-])/(?:[\w.@+~-]+/)+([\w.@+~-]+)")


def hide_host_paths(text: str) -> str:
    """'/root/.venv/lib/python3.12/site-packages/cupy/x.py' becomes '.../x.py'."""
    return _HOST_PATH.sub(lambda m: ".../" + m.group(1), text)


def visible_text(data: str | bytes, *, limit: int = VISIBLE_LIMIT_BYTES) -> str:
    """`data` as text a student may be shown: see the module docstring."""
    if isinstance(data, str):
        data = data.encode("utf-8", errors="replace")
    total = len(data)
    head = data[: limit * 2]  # bounded work whatever the size; cleaning only shortens text
    text = head.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    text = hide_host_paths(_CONTROL.sub("", text))
    encoded = text.encode("utf-8")
    if len(encoded) <= limit and len(head) == total:
        return text
    kept = encoded[:limit].decode("utf-8", errors="ignore")
    return kept + f"\n[Cut here: the whole text was {total} bytes; the first {limit} are shown.]"
