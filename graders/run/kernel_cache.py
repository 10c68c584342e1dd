"""The CuPy kernel cache: built once per host, in a trusted child, copied into every GPU child.

CuPy compiles its elementwise and reduction kernels on first use and keeps them in a cache
folder. A sandboxed child's cache lives in its own fresh folder, so every grading used to start
cold (7 s for matmul-tiled's cases on an H100), and a new worker built the cache at its first
job (52 s on a new host). Here the cache is built once (`python -m graders warm-cache`, which
the GPU image's entrypoint and scripts/setup.sh run, or a worker before it takes jobs), in a
child that runs only the grader's own code (`python -m graders.run.kernel_cache FOLDER`, no
submission), under a file lock so that the workers of a host build it once between them.

It lives in a folder of its own (KERNELGRADER_KERNEL_CACHE_DIR; else /var/cache/kernelgrader
for root or where that folder is the worker user's, else the user's ~/.cache/kernelgrader),
whatever the data folder, named by what its kernels depend on: CuPy's version, NVRTC's (CUDA)
version, the GPU's architecture and the grader's own kernel sources. Every data folder and
restart reuses it. Only a folder this user (or root) owns and no one else may write is used:
what is in it is loaded by every grading.

Each sandboxed GPU child gets a private copy (graders.sandbox.process.register_gpu_seed): it
may read and even write its copy, and no later child ever loads what it wrote.
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
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from graders.gpu import detect_arch, nvidia_smi
from graders.sandbox.process import register_gpu_seed

log = logging.getLogger(__name__)
BUILD_TIMEOUT_S = 600.0
_SOURCES = (
    "generate.py", "normal.py", "warmup.py", "compare.py", "oracles.py", "properties.py",
    "quick.py", "../timing/repetitions.py",
)  # fmt: skip
SHARED_ROOT = Path("/var/cache/kernelgrader")
COMPLETE = ".complete"


@dataclass(frozen=True)
class CacheState:
    """What `ensure_built` found or did."""

    folder: Path | None  # the built cache, registered for GPU children; None: none to use
    built_now: bool = False
    seconds: float = 0.0
    why_not: str = ""  # a sentence where folder is None


def cache_root() -> Path:
    """The folder that holds the caches: see the module docstring."""
    given = os.environ.get("KERNELGRADER_KERNEL_CACHE_DIR")
    if given:
        return Path(given).resolve()
    if os.geteuid() == 0:
        return SHARED_ROOT
    with contextlib.suppress(OSError):
        if SHARED_ROOT.stat().st_uid == os.geteuid():
            return SHARED_ROOT  # an administrator made it the workers' user's
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernelgrader"


@functools.cache
def _toolchain() -> str:
    """CuPy's and NVRTC's versions: the cached kernels are theirs."""
    import cupy
    from cupy_backends.cuda.libs import nvrtc

    major, minor = nvrtc.getVersion()
    return f"cupy{cupy.__version__}-cuda{major}.{minor}"


@functools.cache
def _sources_digest() -> str:
    digest = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in _SOURCES:
        digest.update((here / name).read_bytes())
    return digest.hexdigest()[:12]


def cache_folder(arch: str) -> Path:
    """The cache for GPUs of `arch` ("sm_90"), with this CuPy, CUDA and grader."""
    return cache_root() / f"cupy-cache-{_toolchain()}-{arch}-{_sources_digest()}"


def untrusted(folder: Path) -> str:
    """Why `folder` may not hold kernels that gradings load ("" when it may)."""
    try:
        info = folder.stat()
    except OSError as exc:
        return f"{folder} cannot be read ({exc.strerror})"
    if info.st_uid not in (os.geteuid(), 0):
        return f"{folder} belongs to another user (uid {info.st_uid})"
    if info.st_mode & 0o022:
        return f"other users may write in {folder}"
    return ""


_BUILT: dict[Path, CacheState] = {}
_BUILT_LOCK = threading.Lock()


def ensure_built(arch: str | None = None) -> CacheState:
    """The trusted cache for this worker's GPU (or `arch`), built if need be and registered for
    GPU children. Without one (no GPU, an untrusted folder, a failed build) children compile
    what they need themselves: slower, still correct."""
    arch = arch or detect_arch()
    if not arch:
        return CacheState(None, why_not="There is no GPU here whose architecture is known.")
    final = cache_folder(arch)
    with _BUILT_LOCK:
        if final in _BUILT:
            return _BUILT[final]
        state = _ensure(final, {})
        if state.folder is not None:
            register_gpu_seed(".cupy", state.folder)
            _BUILT[final] = state
        return state


def _ensure(final: Path, env: dict[str, str]) -> CacheState:
    root = final.parent
    try:
        root.mkdir(mode=0o755, parents=True, exist_ok=True)
    except OSError as exc:
        why = f"The CuPy kernel cache cannot be kept in {root} ({exc.strerror})."
        log.warning("%s", why)
        return CacheState(None, why_not=why)
    problem = untrusted(root) or (untrusted(final) if final.exists() else "")
    if problem:
        why = (
            f"The CuPy kernel cache is not used: {problem}, and every grading loads what is in "
            "it. Give it to the workers' user alone (chmod go-w), or set "
            "KERNELGRADER_KERNEL_CACHE_DIR."
        )
        log.warning("%s", why)
        return CacheState(None, why_not=why)
    if (final / COMPLETE).exists():
        log.info("the CuPy kernel cache is built: %s", final)
        return CacheState(final)
    began = time.monotonic()
    with open(str(final) + ".lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # another worker may be building it right now
        if (final / COMPLETE).exists():
            return CacheState(final, seconds=time.monotonic() - began)
        if not _build(final, env):
            return CacheState(None, why_not="Building the CuPy kernel cache failed (see log).")
    took = time.monotonic() - began
    log.info("built the CuPy kernel cache in %.1f s: %s", took, final)
    return CacheState(final, built_now=True, seconds=took)


# Trusted children that build the cache at once, at most (NVRTC is single-threaded).
BUILD_CHILDREN = 12


def _build(final: Path, extra_env: dict[str, str]) -> bool:
    """Trusted children at once, one per core up to BUILD_CHILDREN, each compiling its share
    of the warm-up's steps (graders.run.warmup.steps, dealt out in turn): one child per
    dtype took 61 s on an H100 host, the slowest dtype's time, every child also compiling the
    fused checks."""
    staging = Path(tempfile.mkdtemp(prefix=final.name + "-", dir=final.parent))
    env = {**os.environ, **extra_env, "CUPY_CACHE_DIR": str(staging)}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    began = time.monotonic()
    parts = max(1, min(os.cpu_count() or 1, BUILD_CHILDREN))
    try:
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "graders.run.kernel_cache", str(staging), f"{i}/{parts}"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(parts)
        ]
    except OSError as exc:
        log.warning("building the CuPy kernel cache failed: %s", exc)
        shutil.rmtree(staging, ignore_errors=True)
        return False
    failed = []
    for proc in procs:
        try:
            _, err = proc.communicate(
                timeout=max(1.0, BUILD_TIMEOUT_S - (time.monotonic() - began))
            )
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            err = f"timed out after {BUILD_TIMEOUT_S:g} s"
        if proc.returncode != 0:
            failed.append(err[-2000:])
    if failed:
        log.warning("building the CuPy kernel cache failed: %s", "\n".join(failed))
        shutil.rmtree(staging, ignore_errors=True)
        return False
    (staging / COMPLETE).touch()
    staging.chmod(0o755)  # mkdtemp made it 0700; the worker's user alone writes it either way
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(final)
    staging.rename(final)
    return True


# --- python -m graders warm-cache ------------------------------------------------------------


def _gpus_by_arch() -> dict[str, str]:
    """{arch: a CUDA_VISIBLE_DEVICES value of a GPU of it}, for every GPU this host shows."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:  # this process's GPUs only: build for the one it would use
        arch = detect_arch()
        return {arch: visible} if arch else {}
    found: dict[str, str] = {}
    done = nvidia_smi("--query-gpu=index,compute_cap", "--format=csv,noheader", timeout=30)
    for line in done.stdout.splitlines() if done and done.returncode == 0 else []:
        index, _, cap = (part.strip() for part in line.partition(","))
        if index.isdigit() and cap.replace(".", "").isdigit():
            found.setdefault("sm_" + cap.replace(".", ""), index)
    if not found:
        arch = detect_arch()
        if arch:
            found[arch] = "0"
    return found


def warm_cache(say: Callable[[str], object] = print) -> int:
    """Build the cache for every GPU architecture of this host; the exit status."""
    from graders.gpu import gpu_unavailable_reason

    reason = gpu_unavailable_reason()
    gpus = _gpus_by_arch() if reason is None else {}
    if not gpus:
        say(
            f"{reason or 'No GPU was found here.'} The CuPy kernel cache is built on a GPU "
            "host; a worker there builds it before it takes jobs if it is not built yet."
        )
        return 1
    status = 0
    for arch, device in sorted(gpus.items()):
        final = cache_folder(arch)
        if (final / COMPLETE).exists() and not untrusted(final):
            say(f"The CuPy kernel cache for {arch} is built: {final}")
            continue
        env = {"CUDA_VISIBLE_DEVICES": device, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
        state = _ensure(final, env)
        if state.folder is None:
            say(state.why_not)
            status = 1
        else:
            say(f"Built the CuPy kernel cache for {arch} in {state.seconds:.1f} s: {final}")
    return status


def share(count: int, part: int, parts: int) -> list[int]:
    """The indexes of `count` steps that part `part` of `parts` compiles: every `parts`-th."""
    return list(range(part, count, parts))


def _main(argv: list[str]) -> int:
    """`python -m graders.run.kernel_cache FOLDER PART/PARTS`: one builder child's share."""
    os.environ["CUPY_CACHE_DIR"] = argv[1]  # before CuPy is imported: it reads it then
    from graders.gpu import gpu_lock
    from graders.run.warmup import run_locked, steps

    part, _, parts = argv[2].partition("/")
    every = steps()
    # It runs kernels: never beside a timed section.
    run_locked([every[i] for i in share(len(every), int(part), int(parts))], gpu_lock())
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
