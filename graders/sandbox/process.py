"""Starting a sandboxed child process: its pipes, its private folder, its isolation.

`spawn` starts `python -m graders.sandbox.child` with four channels of its own (request in,
answer out, progress out, and stdout/stderr captured separately) and a lifeline in a fresh
private working directory; the rlimits, network namespace and user are set between fork and exec
(graders.sandbox.isolation). The child may warm up first (a prestarted child, see
graders.sandbox.prestart) and then waits for its one request; `graders.sandbox.supervise`
hands it the request and watches it to the end.

GPU children get private copies of the folders registered with `register_gpu_seed` (the CuPy
kernel cache the worker built in a trusted child): each child reads and may write only its
own copy, so nothing a child writes is ever loaded by a later one.

The lifeline is a pipe whose write end only the worker holds (close-on-exec, for as long as the
child may run); the child arms its read end so that the kernel sends SIGKILL to the child's
whole process group once that end closes (graders.sandbox.child). A worker that dies however
it dies, SIGKILL included, so takes its children and whatever they started with it: they lead
sessions of their own, which a stop by the worker's process group would miss. A parent-death
signal would not do: it fires when the *thread* that forked exits, and spares are started from
short-lived threads (graders.sandbox.prestart).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from graders.sandbox import zygotes
from graders.sandbox.isolation import (
    WORKDIR_PREFIX,
    Credentials,
    child_env,
    make_preexec,
    network_isolation,
    unprivileged_user,
)
from graders.sandbox.limits import SandboxLimits
from graders.sandbox.zygotes import ForkedHandle, Zygote, ZygoteUnavailable

cpu_log = logging.getLogger("graders.sandbox.cpu")
# How the worker's log line about an ended child's CPU begins (bench/throughput.py reads it).
CPU_NOTE = "sandbox cpu:"
_GPU_SEEDS: dict[str, Path] = {}
_SEEDS_LOCK = threading.Lock()


def register_gpu_seed(name: str, folder: Path | None) -> None:
    """Copy `folder` into every GPU child's working directory as `name` (None: stop)."""
    with _SEEDS_LOCK:
        if folder is None:
            _GPU_SEEDS.pop(name, None)
        else:
            _GPU_SEEDS[name] = Path(folder)


class SpawnError(RuntimeError):
    """The child could not be started at all."""


class PopenHandle:
    """A child this process started fresh (fork, then exec of `python -m graders.sandbox.child`)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def exited(self) -> bool:
        """True once the child is a zombie; it is not reaped, so its pid (= group id) stays ours."""
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    def reap(self, *, block: bool) -> tuple[int, resource.struct_rusage | None] | None:
        """(wait status, usage) of the ended child; None while it runs (block=False)."""
        try:
            pid, status, usage = os.wait4(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:  # reaped already: nothing more to learn
            if self.proc.returncode is None:
                self.proc.returncode = 0
            return 0, None
        if pid == 0:
            return None
        self.proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait again
        return status, usage


ChildHandle = PopenHandle | ForkedHandle


@dataclass
class SandboxProcess:
    """A started child, waiting for its request (or already given it)."""

    handle: ChildHandle
    workdir: str
    gpu: bool
    warm: str | None
    in_w: int
    out_r: int
    progress_r: int
    stdout_r: int
    stderr_r: int
    lifeline_w: int
    spawned_at: float
    nproc_limited: bool
    log: list[str] = field(default_factory=list)
    taken: bool = False
    early_progress: bytearray = field(default_factory=bytearray)
    # The peak resident memory of the process it was forked from (the worker, or its zygote;
    # KiB). The kernel carries a forked process's high-water mark across exec, so the child's
    # ru_maxrss is never below it.
    inherited_rss_kb: int = 0
    # What it was asked to do (its request's module), for the worker's CPU notes.
    role: str = ""

    @property
    def pid(self) -> int:
        return self.handle.pid

    def has_exited(self) -> bool:
        """True once the child has ended (not reaped yet: its pid, its group id, stays ours)."""
        return self.handle.exited()

    def kill_group(self, why: str) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
            self.log.append(f"killed process group {self.pid}: {why}")
        except (ProcessLookupError, PermissionError):
            pass

    def cut_lifeline(self) -> None:
        """Once the child is reaped: its group gets SIGKILL again, which ends any straggler."""
        if self.lifeline_w >= 0:
            os.close(self.lifeline_w)
            self.lifeline_w = -1

    def close_output(self) -> None:
        for fd in (self.stdout_r, self.stderr_r):
            if fd >= 0:
                os.close(fd)
        self.stdout_r = self.stderr_r = -1

    def discard(self) -> None:
        """Kill an unused child and clean up after it (a pool being closed)."""
        self.kill_group("discarded unused")
        for fd in (self.in_w, self.out_r, self.progress_r):
            if fd >= 0:
                os.close(fd)
        self.in_w = self.out_r = self.progress_r = -1
        ended = self.handle.reap(block=True)
        note_cpu("unused", ended[1] if ended else None)
        self.cut_lifeline()
        self.close_output()
        shutil.rmtree(self.workdir, ignore_errors=True)


def note_cpu(role: str, usage: resource.struct_rusage | float | None) -> None:
    """One line for the worker's log per ended process: its role (a child's request's module,
    "unused" for a spare never used, a sanitizer tool's name) and the CPU seconds it and the
    processes it waited for used, warm-up included; bench/throughput.py adds them up by role."""
    if usage is None:
        return
    spent = usage if isinstance(usage, float) else usage.ru_utime + usage.ru_stime
    cpu_log.info("%s role=%s cpu_s=%.3f", CPU_NOTE, role or "-", spent)


def _seed(workdir: str) -> None:
    with _SEEDS_LOCK:
        seeds = dict(_GPU_SEEDS)
    for name, folder in seeds.items():
        if folder.is_dir():
            shutil.copytree(folder, os.path.join(workdir, name), dirs_exist_ok=True)


def _close(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


@dataclass
class _Start:
    """How a child is to start: decided once, whether it is forked or started fresh."""

    limits: SandboxLimits
    gpu: bool
    warm: str | None
    workdir: str
    unshare_flags: int
    creds: Credentials | None


def spawn(*, limits: SandboxLimits, gpu: bool, warm: str | None = None) -> SandboxProcess:
    """Start a child under `limits`; it warms up with `warm`, then waits for its request.

    Forked from this worker's zygote of its kind where zygotes are on (graders.sandbox.zygotes),
    else (or where that fails) a fresh interpreter; either way it gets the same isolation."""
    log: list[str] = []
    unshare_flags = 0
    if not limits.network:
        unshare_flags, note = network_isolation()
        log.append(note)
    # A GPU child stays the worker's user: the driver's device files and the run stage's
    # lock files are the worker's. The compiler needs neither.
    creds = None
    if not gpu:
        creds, note = unprivileged_user()
        log.append(note)
    # The worker's pid in the name: a worker's next start removes folders whose owner was
    # killed (and that no live process, such as a child it left running, still works in).
    workdir = tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-")
    if gpu:
        _seed(workdir)
    if creds is not None:
        os.chown(workdir, creds.uid, creds.gid)
    start = _Start(limits, gpu, warm, workdir, unshare_flags, creds)
    zygote = zygotes.current("gpu" if gpu else "cpu") if zygotes.enabled() else None
    if zygote is not None:
        try:
            child = _forked(zygote, start)
            child.log[:0] = log
            return child
        except ZygoteUnavailable as exc:
            log.append(f"no zygote ({exc}): a fresh interpreter instead")
    child = _fresh(start)
    child.log[:0] = log
    return child


def _pipes() -> tuple[list[int], list[int]]:
    """(ours, the child's): request in, answer out, progress out, lifeline, stdout, stderr.

    os.pipe's ends are close-on-exec: no other child of the worker inherits a write end, the
    lifeline's above all."""
    pairs = [os.pipe() for _ in range(6)]
    in_r, in_w = pairs[0]
    out_r, out_w = pairs[1]
    progress_r, progress_w = pairs[2]
    lifeline_r, lifeline_w = pairs[3]
    stdout_r, stdout_w = pairs[4]
    stderr_r, stderr_w = pairs[5]
    ours = [in_w, out_r, progress_r, lifeline_w, stdout_r, stderr_r]
    theirs = [in_r, out_w, progress_w, lifeline_r, stdout_w, stderr_w]
    return ours, theirs


def _process(start: _Start, handle: ChildHandle, ours: list[int], inherited: int) -> SandboxProcess:
    in_w, out_r, progress_r, lifeline_w, stdout_r, stderr_r = ours
    nproc = os.geteuid() != 0 or start.creds is not None
    return SandboxProcess(
        handle,
        start.workdir,
        start.gpu,
        start.warm,
        in_w,
        out_r,
        progress_r,
        stdout_r,
        stderr_r,
        lifeline_w,
        time.monotonic(),
        nproc,
        inherited_rss_kb=inherited,
    )


def _forked(zygote: Zygote, start: _Start) -> SandboxProcess:
    ours, theirs = _pipes()
    spec = {
        "workdir": start.workdir,
        "env": child_env(start.workdir, start.gpu),
        "limits": dataclasses.asdict(start.limits),
        "gpu": start.gpu,
        "unshare": start.unshare_flags,
        "creds": dataclasses.asdict(start.creds) if start.creds is not None else None,
        "warm": start.warm,
    }
    try:
        handle, inherited = zygote.spawn(spec, theirs)
    except ZygoteUnavailable:
        _close(*ours)
        raise
    finally:
        _close(*theirs)
    child = _process(start, handle, ours, inherited)
    child.log.append(f"forked from the {zygote.kind} zygote (pid {zygote.pid})")
    return child


def _fresh(start: _Start) -> SandboxProcess:
    ours, theirs = _pipes()
    in_r, out_w, progress_w, lifeline_r, stdout_w, stderr_w = theirs
    argv = [sys.executable, "-m", "graders.sandbox.child"]
    argv += [str(in_r), str(out_w), str(progress_w), str(lifeline_r)]
    if start.warm:
        argv.append(start.warm)
    inherited_rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        proc = subprocess.Popen(
            argv,
            cwd=start.workdir,
            env=child_env(start.workdir, start.gpu),
            stdin=subprocess.DEVNULL,
            stdout=stdout_w,
            stderr=stderr_w,
            pass_fds=(in_r, out_w, progress_w, lifeline_r),
            start_new_session=True,
            preexec_fn=make_preexec(start.limits, start.gpu, start.unshare_flags, start.creds),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        _close(*ours)
        shutil.rmtree(start.workdir, ignore_errors=True)
        raise SpawnError(f"could not start the sandboxed child: {exc}") from exc
    finally:
        _close(*theirs)
    return _process(start, PopenHandle(proc), ours, inherited_rss_kb)
