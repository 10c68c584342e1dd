"""Sandbox folders that killed workers left behind, removed when a worker starts.

The grader names each folder it makes in the temporary directory after the worker process
that owns it (`kg-sandbox-<pid>-...`, `kernelgrader-run-<pid>-...`) and removes it when done;
a worker killed mid-job cannot. A folder is removed here only when its owner process is gone,
so workers sharing a machine never remove each other's live folders.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

PREFIXES = ("kg-sandbox-", "kernelgrader-run-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    try:
        # A zombie has exited; only its parent has not collected it yet.
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def owner_pid(name: str) -> int | None:
    for prefix in PREFIXES:
        if name.startswith(prefix):
            # "<pid>-<random>": a name without the pid part (an older grader's) is no one's.
            pid, dash, _ = name[len(prefix) :].partition("-")
            return int(pid) if dash and pid.isdigit() else None
    return None


def remove_orphaned_sandboxes(directory: Path | None = None) -> list[Path]:
    """Remove sandbox folders whose owner process is gone; return those removed."""
    directory = directory or Path(tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(directory.iterdir())
    except OSError:
        return removed
    for entry in entries:
        pid = owner_pid(entry.name)
        if pid is None or pid == os.getpid() or _alive(pid) or not entry.is_dir():
            continue
        shutil.rmtree(entry, ignore_errors=True)
        if not entry.exists():
            removed.append(entry)
    if removed:
        log.info("removed %d sandbox folders of workers that were killed", len(removed))
    return removed
