"""A lab's content digest: sha256 over lab.toml and every file it names.

Two workers (or two courses) that hold the same lab files get the same digest, and any change to
the spec, the page or a reference kernel gives a new one: reference timings are kept per digest,
so an edited reference is timed again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path


def content_digest(folder: Path, names: Iterable[str]) -> str:
    """sha256 of lab.toml and the named files (by name and bytes, in name order), as hex."""
    digest = hashlib.sha256()
    for name in sorted({"lab.toml", *names}):
        data = (folder / name).read_bytes()
        digest.update(name.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return digest.hexdigest()
