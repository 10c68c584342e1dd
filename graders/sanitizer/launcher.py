"""The sanitizer's native launcher (launcher.c): built once per host from its source, with the
host's C compiler, and handed to every sanitizer child.

Under compute-sanitizer a Python program paid for Python, NumPy, CuPy and a context in each
tool (1.75 to 2.7 CPU-s per tool on an H100 host); the launcher pays for the context alone
(about 0.6 CPU-s a tool, measured on an H200). It declares the driver functions it calls and
opens libcuda.so.1 when it runs, so a C compiler is all it needs (`cc`, else `gcc` or `clang`,
or KERNELGRADER_CC): no CUDA headers, no toolkit.

When: `python -m graders warm-cache` builds it beside the CuPy kernel cache (scripts/setup.sh
runs that at install and the worker image's entrypoint at start), and a worker builds it
before its first job if it is missing (`ensure_built`, a second or so); a worker image built
with a compiler carries one (KERNELGRADER_SANITIZER_LAUNCHER names it). Where: a folder of its
own in the kernel cache's root (graders.run.kernel_cache.cache_root), named by the source's
digest, so a changed source builds anew; used only from a folder this user (or root) owns and
no one else may write, since every sanitizer run executes it. Each GPU child gets a private
copy (graders.sandbox.process.register_gpu_seed), as of the kernel cache.

Where no compiler is found, or the build fails, the tools run the Python program
(graders.sanitizer.target) as before, and the worker's log says why once.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from graders.run.kernel_cache import cache_root, untrusted
from graders.sandbox.process import register_gpu_seed

log = logging.getLogger(__name__)

SOURCE = Path(__file__).resolve().with_name("launcher.c")
NAME = "kg-sanitizer-launcher"
# The folder each GPU child's copy lies in, inside its working directory.
SEED = ".kg-launcher"
COMPILERS = ("cc", "gcc", "clang")
# A launcher built ahead, in a folder of its own (docker/worker.Dockerfile's LAUNCHER_CC).
GIVEN_ENV = "KERNELGRADER_SANITIZER_LAUNCHER"
BUILD_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class LauncherState:
    """What `ensure_built` found or did."""

    path: Path | None
    built_now: bool = False
    why_not: str = ""  # a sentence where path is None


@functools.cache
def _digest() -> str:
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]


def folder() -> Path:
    return cache_root() / f"sanitizer-launcher-{_digest()}"


def compiler() -> str | None:
    """The C compiler to build with: KERNELGRADER_CC, else the first of COMPILERS on PATH."""
    given = os.environ.get("KERNELGRADER_CC")
    if given:
        return shutil.which(given)
    return next((found for name in COMPILERS if (found := shutil.which(name))), None)


def build(target: Path, cc: str) -> str:
    """Compile the launcher into `target`; "" on success, else why not."""
    command = [cc, "-O2", "-std=c11", "-Wall", "-o", str(target), str(SOURCE), "-ldl"]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{cc} failed: {exc}"
    if done.returncode != 0:
        return f"{cc} failed: {(done.stderr or done.stdout).strip()[-2000:]}"
    return ""


_STATE: LauncherState | None = None
_LOCK = threading.Lock()


def ensure_built() -> LauncherState:
    """The launcher for this host, built if need be and registered for GPU children (once per
    process); without one the sanitizer's tools run the Python program."""
    global _STATE
    with _LOCK:
        if _STATE is None or _STATE.path is None:
            _STATE = _ensure(folder())
            if _STATE.path is not None:
                register_gpu_seed(SEED, _STATE.path.parent)
            else:
                log.warning("the sanitizer runs its Python program: %s", _STATE.why_not)
        return _STATE


def _given() -> LauncherState | None:
    """A launcher built ahead (a worker image's), named by KERNELGRADER_SANITIZER_LAUNCHER, in a
    folder of its own; None when none is named."""
    named = os.environ.get(GIVEN_ENV)
    if not named:
        return None
    binary = Path(named)
    problem = untrusted(binary.parent) or untrusted(binary)
    if problem or not os.access(binary, os.X_OK):
        why = problem or f"{binary} is not an executable file"
        return LauncherState(None, why_not=f"{GIVEN_ENV} is not used: {why}.")
    return LauncherState(binary)


def _ensure(final: Path) -> LauncherState:
    given = _given()
    if given is not None:
        return given
    binary = final / NAME
    root = final.parent
    try:
        root.mkdir(mode=0o755, parents=True, exist_ok=True)
    except OSError as exc:
        return LauncherState(None, why_not=f"{root} cannot be made ({exc.strerror}).")
    problem = untrusted(root) or (untrusted(final) if final.exists() else "")
    if problem:
        return LauncherState(None, why_not=f"the launcher is not used: {problem}.")
    if binary.is_file():
        return LauncherState(binary)
    cc = compiler()
    if cc is None:
        return LauncherState(
            None,
            why_not="no C compiler (cc, gcc or clang; or KERNELGRADER_CC) to build the "
            "sanitizer's launcher with",
        )
    with open(str(final) + ".lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # another worker may be building it right now
        if binary.is_file():
            return LauncherState(binary)
        staging = Path(tempfile.mkdtemp(prefix=final.name + "-", dir=root))
        why = build(staging / NAME, cc)
        if why:
            shutil.rmtree(staging, ignore_errors=True)
            return LauncherState(None, why_not=f"building the sanitizer's launcher: {why}")
        staging.chmod(0o755)
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(final)
        staging.rename(final)
    log.info("built the sanitizer's launcher: %s", binary)
    return LauncherState(binary, built_now=True)


def in_child() -> str | None:
    """In a sandboxed GPU child: its own copy of the launcher, or None (the Python program)."""
    candidate = Path.cwd() / SEED / NAME
    return str(candidate) if os.access(candidate, os.X_OK) else None
