"""What killed workers left behind, reaped when a worker starts: processes, then folders.

The sandbox names each child's private folder in the temporary directory after the worker
process that made it (`kg-sandbox-<pid>-...`; `kernelgrader-run-<pid>-...` from graders before
the run stage was regrouped) and removes it when the child is done; a worker killed mid-job
cannot. Its children die with it (their lifeline, graders.sandbox.process), but a child left by
a grader without one, or a process that escaped its group, may still hold the GPU: every
process that works in such a folder (a sandboxed child, a compute-sanitizer tool it started)
is stopped, its whole process group with it, and named in the log. Then the folder goes.

A folder is whose worker is gone when no live process has that pid, or the process that has it
started after the folder was made (a pid used again). Workers sharing a machine
(`worker --gpus`) never touch each other's live folders or children. A process with a
controlling terminal (someone's shell in the folder) is never stopped: sandboxed children have
none.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

PREFIXES = ("kg-sandbox-", "kernelgrader-run-")
# How long the reaped processes get to be gone before their folders are looked at again.
REAP_WAIT_S = 10.0
# Process start times are known to a clock tick, the boot time to a second.
_START_SLACK_S = 2.0


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    pgid: int
    sid: int
    tty: int
    state: str
    started_at: float  # seconds since the epoch
    cwd: Path | None
    command: str


@dataclass
class Reaped:
    """What a worker's start stopped and removed."""

    killed: list[ProcessInfo] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)


@functools.cache
def _boot_time(proc: Path) -> float:
    """When the machine booted (/proc/stat's btime): read once, not for every process."""
    with contextlib.suppress(OSError, ValueError):
        for line in (proc / "stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    return 0.0


def process_info(pid: int, proc: Path = Path("/proc")) -> ProcessInfo | None:
    """What /proc says of `pid`; None when it is gone or not ours to read."""
    entry = proc / str(pid)
    try:
        stat = (entry / "stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3 of stat(5)); the pgrp, session, tty and start time follow.
    try:
        state, pgid, sid, tty = fields[0], int(fields[2]), int(fields[3]), int(fields[4])
        started = _boot_time(proc) + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (IndexError, ValueError):
        return None
    try:
        cwd: Path | None = Path(os.readlink(entry / "cwd"))
    except OSError:
        cwd = None  # a zombie, or another user's process
    try:
        raw = (entry / "cmdline").read_bytes()
        command = raw.replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    except OSError:
        command = ""
    return ProcessInfo(pid, pgid, sid, tty, state, started, cwd, command)


def _alive(info: ProcessInfo | None) -> bool:
    return info is not None and info.state != "Z"  # a zombie has exited


def owner_pid(name: str) -> int | None:
    for prefix in PREFIXES:
        if name.startswith(prefix):
            # "<pid>-<random>": a name without the pid part (an older grader's) is no one's.
            pid, dash, _ = name[len(prefix) :].partition("-")
            return int(pid) if dash and pid.isdigit() else None
    return None


def _owner_gone(pid: int, folder: Path) -> bool:
    info = process_info(pid)
    if not _alive(info):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False  # another user's live process, which /proc would not show us
        return info is not None  # a zombie
    assert info is not None
    try:
        made = folder.stat().st_mtime  # no earlier than the folder was made
    except OSError:
        return False
    return info.started_at > made + _START_SLACK_S


def live_processes(proc: Path = Path("/proc")) -> list[ProcessInfo]:
    """Every live process this one may inspect (others' are left out: a worker's children are
    its own user's, or run as the sandbox user only where the worker is root)."""
    found: list[ProcessInfo] = []
    try:
        entries = list(proc.iterdir())
    except OSError:
        return found
    for entry in entries:
        if entry.name.isdigit():
            info = process_info(int(entry.name), proc)
            if _alive(info):
                assert info is not None
                found.append(info)
    return found


def working_directories(proc: Path = Path("/proc")) -> set[Path]:
    """The working directory of every live process this one may inspect."""
    return {p.cwd for p in live_processes(proc) if p.cwd is not None}


def _inside(cwd: Path | None, folder: Path) -> bool:
    return cwd is not None and (cwd == folder or folder in cwd.parents)


def _orphans(directory: Path) -> list[Path]:
    try:
        entries = list(directory.iterdir())
    except OSError:
        return []
    found = []
    for entry in entries:
        pid = owner_pid(entry.name)
        if pid is None or pid == os.getpid() or not entry.is_dir():
            continue
        if _owner_gone(pid, entry):
            found.append(entry.resolve())
    return found


def _kill_leftovers(orphans: list[Path]) -> list[ProcessInfo]:
    mine = {os.getpid(), os.getpgrp(), os.getsid(0)}
    killed: list[ProcessInfo] = []
    groups: set[int] = set()
    for info in live_processes():
        folder = next((f for f in orphans if _inside(info.cwd, f)), None)
        if folder is None or info.tty != 0:
            continue
        if info.pid in mine or info.pgid in mine or info.sid in mine or info.pgid <= 1:
            continue
        if info.pgid not in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(info.pgid, signal.SIGKILL)
            groups.add(info.pgid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(info.pid, signal.SIGKILL)  # in case it left the group
        killed.append(info)
        log.warning(
            "stopped process %d (group %d: %s) that a killed worker left working in %s",
            info.pid,
            info.pgid,
            info.command or "?",
            folder,
        )
    return killed


def reap_orphaned_sandboxes(
    directory: Path | None = None, *, wait_s: float = REAP_WAIT_S
) -> Reaped:
    """Stop what killed workers left running in their sandbox folders, then remove the folders
    in which no live process works any more."""
    directory = Path(directory or tempfile.gettempdir()).resolve()
    reaped = Reaped()
    orphans = _orphans(directory)
    if not orphans:
        return reaped
    reaped.killed = _kill_leftovers(orphans)
    deadline = time.monotonic() + wait_s
    while reaped.killed and time.monotonic() < deadline:
        if not any(_alive(process_info(p.pid)) for p in reaped.killed):
            break
        time.sleep(0.05)
    cwds = {cwd for cwd in working_directories() if cwd.is_relative_to(directory)}
    for entry in orphans:
        if any(_inside(cwd, entry) for cwd in cwds):
            log.warning("kept %s: a process still works in it after it was stopped", entry)
            reaped.kept.append(entry)
            continue
        shutil.rmtree(entry, ignore_errors=True)
        if not entry.exists():
            reaped.removed.append(entry)
    if reaped.removed:
        log.info("removed %d sandbox folders of workers that were killed", len(reaped.removed))
    return reaped
