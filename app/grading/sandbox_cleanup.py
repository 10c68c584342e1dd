"""Sandbox folders that killed workers left behind, removed when a worker starts.

The sandbox names each child's private folder in the temporary directory after the worker
process that made it (`kg-sandbox-<pid>-...`; `kernelgrader-run-<pid>-...` from graders before
the run stage was regrouped) and removes it when the child is done; a worker killed mid-job
cannot. A folder is removed here only when its owner process is gone and no live process works
in it: a child started ahead of need (graders.sandbox.prestart), or one busy with a request,
runs in a session of its own and may outlive a worker that was killed for a while, and workers
sharing a machine (`worker --gpus`) never remove each other's live folders.
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


def working_directories(proc: Path = Path("/proc")) -> set[Path]:
    """The working directory of every live process this one may inspect.

    A sandboxed child works in its folder (and so does anything it starts); the folder's
    name says only which worker made it. Processes of other users that this one may not
    inspect are left out: a worker's children are its own user's, or run as the sandbox user
    only where the worker is root, which may inspect every process.
    """
    found: set[Path] = set()
    try:
        entries = list(proc.iterdir())
    except OSError:
        return found
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            found.add(Path(os.readlink(entry / "cwd")))
        except OSError:
            continue  # gone meanwhile, a zombie, or not ours to inspect
    return found


def _in_use(folder: Path, cwds: set[Path]) -> bool:
    return any(cwd == folder or folder in cwd.parents for cwd in cwds)


def remove_orphaned_sandboxes(directory: Path | None = None) -> list[Path]:
    """Remove sandbox folders whose owner process is gone and in which no live process works;
    return those removed."""
    directory = Path(directory or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(directory.iterdir())
    except OSError:
        return removed
    orphans = []
    for entry in entries:
        pid = owner_pid(entry.name)
        if pid is None or pid == os.getpid() or _alive(pid) or not entry.is_dir():
            continue
        orphans.append(entry)
    if not orphans:
        return removed
    cwds = {cwd for cwd in working_directories() if cwd.is_relative_to(directory.resolve())}
    for entry in orphans:
        if _in_use(entry.resolve(), cwds):
            log.info("kept %s: a process its worker left still works in it", entry)
            continue
        shutil.rmtree(entry, ignore_errors=True)
        if not entry.exists():
            removed.append(entry)
    if removed:
        log.info("removed %d sandbox folders of workers that were killed", len(removed))
    return removed
