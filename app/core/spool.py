"""Downloads written in the request's thread and sent from a spool.

An export (gradebook CSV, a lab's sources as a zip) is written into a spool (memory up to
`SPOOL_IN_MEMORY_BYTES`, a temporary file past it) while the request holds its thread and
database connection, then sent from it in chunks: the database is done with before the first
byte goes out, so a slow download holds no connection and no request thread.
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import AsyncIterator, Callable
from typing import IO

SPOOL_IN_MEMORY_BYTES = 1024 * 1024
CHUNK_BYTES = 64 * 1024


def new_spool() -> IO[bytes]:
    return tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY_BYTES)  # noqa: SIM115


def text_spool(write: Callable[[IO[str]], None]) -> IO[bytes]:
    """A spool holding what `write` wrote as UTF-8 text, rewound for reading."""
    spool = new_spool()
    text = io.TextIOWrapper(spool, encoding="utf-8", newline="")
    try:
        write(text)
        text.flush()
    except BaseException:
        text.close()  # and the spool under it
        raise
    text.detach()
    spool.seek(0)
    return spool


async def chunks_of(spool: IO[bytes]) -> AsyncIterator[bytes]:
    """The spool's bytes in chunks; closes it when done (or when the client went away)."""
    try:
        while chunk := spool.read(CHUNK_BYTES):
            yield chunk
    finally:
        spool.close()
