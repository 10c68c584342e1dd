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

from graders.sandbox.isolation import (
    child_env,
    make_preexec,
    network_isolation,
    unprivileged_user,
)
from graders.sandbox.limits import SandboxLimits

# A child's private folder in the temporary directory: `kg-sandbox-<worker pid>-<random>`.
WORKDIR_PREFIX = "kg-sandbox-"

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


@dataclass
class SandboxProcess:
    """A started child, waiting for its request (or already given it)."""

    proc: subprocess.Popen[bytes]
    workdir: str
    gpu: bool
    warm: str | None
    in_w: int
    out_r: int
    progress_r: int
    lifeline_w: int
    spawned_at: float
    nproc_limited: bool
    log: list[str] = field(default_factory=list)
    taken: bool = False
    early_progress: bytearray = field(default_factory=bytearray)
    # The worker's peak resident memory when it forked this child (KiB). The kernel carries a
    # forked process's high-water mark across exec, so the child's ru_maxrss is never below it.
    inherited_rss_kb: int = 0

    @property
    def pid(self) -> int:
        return self.proc.pid

    def has_exited(self) -> bool:
        """True once the child is a zombie; it is not reaped, so its pid (= group id) stays ours."""
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

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

    def discard(self) -> None:
        """Kill an unused child and clean up after it (a pool being closed)."""
        self.kill_group("discarded unused")
        for fd in (self.in_w, self.out_r, self.progress_r):
            if fd >= 0:
                os.close(fd)
        self.in_w = self.out_r = self.progress_r = -1
        try:
            os.waitpid(self.pid, 0)
            self.proc.returncode = -signal.SIGKILL
        except ChildProcessError:
            pass
        self.cut_lifeline()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _seed(workdir: str) -> None:
    with _SEEDS_LOCK:
        seeds = dict(_GPU_SEEDS)
    for name, folder in seeds.items():
        if folder.is_dir():
            shutil.copytree(folder, os.path.join(workdir, name), dirs_exist_ok=True)


def spawn(*, limits: SandboxLimits, gpu: bool, warm: str | None = None) -> SandboxProcess:
    """Start a child under `limits`; it warms up with `warm`, then waits for its request."""
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
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    progress_r, progress_w = os.pipe()
    # os.pipe's ends are close-on-exec: no other child of the worker inherits this write end.
    lifeline_r, lifeline_w = os.pipe()
    argv = [sys.executable, "-m", "graders.sandbox.child"]
    argv += [str(in_r), str(out_w), str(progress_w), str(lifeline_r)]
    if warm:
        argv.append(warm)
    inherited_rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        proc = subprocess.Popen(
            argv,
            cwd=workdir,
            env=child_env(workdir, gpu),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(in_r, out_w, progress_w, lifeline_r),
            start_new_session=True,
            preexec_fn=make_preexec(limits, gpu, unshare_flags, creds),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        for fd in (in_w, out_r, progress_r, lifeline_w):
            os.close(fd)
        shutil.rmtree(workdir, ignore_errors=True)
        raise SpawnError(f"could not start the sandboxed child: {exc}") from exc
    finally:
        for fd in (in_r, out_w, progress_w, lifeline_r):
            os.close(fd)
    nproc = os.geteuid() != 0 or creds is not None
    return SandboxProcess(
        proc,
        workdir,
        gpu,
        warm,
        in_w,
        out_r,
        progress_r,
        lifeline_w,
        time.monotonic(),
        nproc,
        log,
        inherited_rss_kb=inherited_rss_kb,
    )
