"""How a sandboxed child is cut off: environment, rlimits, network namespace, unprivileged user.

Used by `graders.sandbox.runner`; see its docstring for the whole picture. Each isolation that
may be refused on some machine (namespaces, a user to drop to) is probed once, in a throwaway
child, and reported as a sentence for the outcome's log, so a fallback is never silent.
"""

from __future__ import annotations

import ctypes
import functools
import os
import pwd
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from graders.gpu import gpu_key, lock_dir
from graders.sandbox.limits import SandboxLimits

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
# Environment variables the CUDA driver, runtime and CuPy read; passed only for gpu=True.
_GPU_ENV_PREFIXES = ("CUDA_", "NVIDIA_", "CUPY_", "NCCL_")
# Library paths are not secrets; NVRTC (CPU-only) needs them too.
_LIBRARY_ENV = ("LD_LIBRARY_PATH", "CUDA_PATH", "CUDA_HOME")
# Who a CPU-only child (the compiler) runs as when the worker is root; "" turns this off.
SANDBOX_USER_ENV = "KERNELGRADER_SANDBOX_USER"
SPARE_SLOTS_ENV = "KERNELGRADER_GPU_SPARES"
SPARE_OWNER_ENV = "KERNELGRADER_SPARE_OWNER"
_owners: dict[int, str] = {}


def spare_owner() -> str:
    """This worker process's name among the GPU's spare owners (graders.sandbox.spare_slots):
    its pid and a random number, digits only. Worker containers share the lock folder but not
    their pid namespaces, so a pid alone could be another container's too."""
    pid = os.getpid()  # a forked worker gets a name of its own
    if pid not in _owners:
        _owners[pid] = f"{pid}{int.from_bytes(os.urandom(4), 'big'):010d}"
    return _owners[pid]


_THREAD_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# OpenBLAS's idle threads spin 2**N CPU cycles before they sleep (OPENBLAS_THREAD_TIMEOUT, N
# from 4 to 30, 28 by default): 0.1 s each at NumPy's import. With one thread there is none to
# spin; the setting stays for a library that starts its own pool anyway.
BLAS_SPIN_EXPONENT = "4"
CPU_CHILD_NICE = 10  # added to a CPU-only child's nice value
AUTOGROUP_TRIES = 10  # 25 ms apart: one autogroup change per 0.1 s (_lower_autogroup)
AUTOGROUP_PAUSE_S = 0.025
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
# A child's private folder in the temporary directory: `kg-sandbox-<worker pid>-<random>` (a
# zygote's too), so that a worker's next start finds what a killed one left.
WORKDIR_PREFIX = "kg-sandbox-"


@dataclass(frozen=True)
class Credentials:
    uid: int
    gid: int
    name: str


def _libc_unshare() -> Callable[[int], int] | None:
    """os.unshare on 3.12+, libc's unshare through ctypes on 3.11; None where neither exists."""
    if hasattr(os, "unshare"):

        def via_os(flags: int) -> int:
            os.unshare(flags)  # type: ignore[attr-defined]  # new in Python 3.12
            return 0

        return via_os
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        func = libc.unshare
    except (OSError, AttributeError):
        return None

    def via_libc(flags: int) -> int:
        if func(flags) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return 0

    return via_libc


def _probe(preexec: Callable[[], object], code: str = "pass") -> None:
    """Start a throwaway child with this preexec; raise if it cannot start or run `code`."""
    subprocess.run(
        [sys.executable, "-c", code],
        preexec_fn=preexec,
        check=True,
        timeout=60,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": PACKAGE_ROOT, "HOME": "/"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@functools.cache
def network_isolation() -> tuple[int, str]:
    """The unshare flags that cut a child off the network here, or (0, why not)."""
    unshare = _libc_unshare()
    if unshare is None:
        return 0, "network isolation unavailable: this system has no unshare(2)"
    flags = _CLONE_NEWNET if os.geteuid() == 0 else _CLONE_NEWUSER | _CLONE_NEWNET
    try:
        _probe(lambda: unshare(flags))  # one system call, right after fork
    except (subprocess.SubprocessError, OSError) as exc:
        who = "as root" if os.geteuid() == 0 else "without root (user namespaces refused?)"
        return 0, f"network isolation unavailable: unshare failed {who}: {exc}"
    kind = "network namespace" if flags == _CLONE_NEWNET else "user + network namespace"
    return flags, f"network isolated: new {kind}"


def _drop_to(creds: Credentials) -> None:
    os.setgroups([])
    os.setgid(creds.gid)
    os.setuid(creds.uid)


@functools.cache
def unprivileged_user() -> tuple[Credentials | None, str]:
    """Whom a CPU-only child runs as when the worker is root, or (None, why it stays)."""
    if os.geteuid() != 0:
        return None, "runs as the worker's own (unprivileged) user"
    name = os.environ.get(SANDBOX_USER_ENV, "nobody")
    if not name:
        return None, f"privilege drop off: {SANDBOX_USER_ENV} is empty; runs as root"
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None, f"privilege drop unavailable: there is no user {name!r}; runs as root"
    creds = Credentials(uid=entry.pw_uid, gid=entry.pw_gid, name=name)
    try:
        # The child must be able to start Python, import the sandbox and load NVRTC as that
        # user; an interpreter under a private home (pyenv in /root) is the usual refusal.
        _probe(
            lambda: _drop_to(creds),
            "import graders.sandbox.child\n"
            "try:\n    import cupy_backends.cuda.libs.nvrtc\nexcept ImportError:\n    pass\n",
        )
    except (subprocess.SubprocessError, OSError) as exc:
        return None, f"privilege drop unavailable: {name} cannot run {sys.executable} ({exc})"
    return creds, f"runs as {name} (uid {creds.uid})"


def child_env(workdir: str, gpu: bool) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONPATH": PACKAGE_ROOT,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    for name in _LIBRARY_ENV:
        if name in os.environ:
            env[name] = os.environ[name]
    if gpu:
        for name, value in os.environ.items():
            if name.startswith(_GPU_ENV_PREFIXES):
                env[name] = value
        # The GPU's timing lock as the worker finds it (its folder, and the physical GPU's
        # name, which NVML in the worker knows), so a child takes the very same lock.
        env["KERNELGRADER_LOCK_DIR"] = str(lock_dir())
        env["KERNELGRADER_GPU_KEY"] = gpu_key()
        if SPARE_SLOTS_ENV in os.environ:  # the host's cap on GPU spares (spare_slots)
            env[SPARE_SLOTS_ENV] = os.environ[SPARE_SLOTS_ENV]
        env[SPARE_OWNER_ENV] = spare_owner()
    # The child's compile cache must stay inside its private directory, not in a shared HOME.
    env["CUPY_CACHE_DIR"] = os.path.join(workdir, ".cupy")
    # NumPy's BLAS starts a thread per core when imported (32 on a 32-core host). A CPU-only
    # child runs as the shared sandbox user under RLIMIT_NPROC, where the threads of every
    # worker's children count together, and OpenBLAS raises SIGINT in the child when it cannot
    # start one: seen on a two-GPU host, as a reference "crashed (SIGINT)" while compiling.
    # A GPU child gets one too: `import numpy` used 2.2 CPU-s on a 16-core H200 host with a
    # thread per core, 0.44 with one. No shipped Python oracle calls BLAS (bincount, transpose,
    # cumsum, softmax's exp and sums); one that needs a matrix product computes it on the GPU
    # with CuPy, which an oracle may return (reference_kernels/SPEC_FORMAT.md).
    for name in _THREAD_ENV:
        env[name] = "1"
    env["OPENBLAS_THREAD_TIMEOUT"] = BLAS_SPIN_EXPONENT
    return env


def _lower_autogroup(nice: int, path: str = "/proc/self/autogroup") -> None:
    """Give this process's scheduling group (sched_autogroup) the nice value `nice`.

    The kernel takes one such change per 0.1 s from a process without CAP_SYS_ADMIN in the
    host's first user namespace (a container's root is such a process), counted across the
    whole host, and answers EAGAIN to the others: try again for up to a quarter of a second,
    then go on with the process's own nice value alone."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return  # no autogroups here: the nice value is what counts
    try:
        for _ in range(AUTOGROUP_TRIES):
            try:
                os.write(fd, b"%d" % nice)
                return
            except BlockingIOError:
                time.sleep(AUTOGROUP_PAUSE_S)
            except OSError:
                return
    finally:
        os.close(fd)


def make_preexec(
    limits: SandboxLimits, gpu: bool, unshare_flags: int, creds: Credentials | None
) -> Callable[[], None]:
    """Runs in the child between fork and exec: only plain system calls, nothing that locks."""
    unshare = _libc_unshare() if unshare_flags else None
    mib = 1024 * 1024
    settings: list[tuple[int, int]] = [
        (resource.RLIMIT_CPU, max(1, int(limits.cpu_seconds))),
        (resource.RLIMIT_NOFILE, limits.max_open_files),
        (resource.RLIMIT_FSIZE, limits.max_file_size_mb * mib),
        (resource.RLIMIT_CORE, 0),
    ]
    if limits.memory_mb is not None:
        memory_kind = resource.RLIMIT_DATA if gpu else resource.RLIMIT_AS
        settings.append((memory_kind, limits.memory_mb * mib))
    if os.geteuid() != 0 or creds is not None:
        # Counts every process of the user the child ends up as; root would ignore it.
        settings.append((resource.RLIMIT_NPROC, limits.max_processes))

    def preexec() -> None:
        if not gpu:
            # The compiler yields the CPU to the web server and the worker: where they share a
            # host (the embedded default), a deadline's compiles would otherwise starve the
            # requests. GPU children keep their priority, so a timed section is not preempted.
            os.nice(CPU_CHILD_NICE)
            # The child leads a session of its own, and so (where the kernel groups tasks by
            # session, sched_autogroup) a scheduling group of its own that shares the CPU
            # equally with the web server's whatever the nice value above: lower the group's.
            # Before the limits: until exec the child still holds the worker's descriptors,
            # more than its open-files limit where the worker has many (a database pool,
            # sockets), and opening /proc/self/autogroup would fail past it.
            _lower_autogroup(CPU_CHILD_NICE)
        for kind, value in settings:
            soft, hard = resource.getrlimit(kind)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            # CPU: SIGXCPU at the soft limit, SIGKILL a second later if it is ignored.
            new_hard = value + 1 if kind == resource.RLIMIT_CPU else value
            if hard != resource.RLIM_INFINITY:
                new_hard = min(new_hard, hard)
            resource.setrlimit(kind, (value, new_hard))
        if unshare is not None:
            unshare(unshare_flags)  # needs root's capabilities: before dropping them
        if creds is not None:
            _drop_to(creds)

    return preexec
