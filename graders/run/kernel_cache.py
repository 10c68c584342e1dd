"""The worker's CuPy kernel cache: built once in a trusted child, copied into every GPU child.

CuPy compiles its elementwise and reduction kernels on first use and keeps them in a cache
folder. A sandboxed child's cache lives in its own fresh folder, so every grading used to start
cold (7 s for matmul-tiled's cases on an H100). Here the worker builds the cache once, in a
child that runs only the grader's own code (`python -m graders.run.kernel_cache FOLDER`, no
submission), under a file lock so that the workers of one host build it once between them.
Each sandboxed GPU child then gets a private copy (graders.sandbox.process.register_gpu_seed):
it may read and even write its copy, and no later child ever loads what it wrote.
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
import time
from pathlib import Path

from graders.gpu import lock_dir
from graders.sandbox.process import register_gpu_seed

log = logging.getLogger(__name__)
BUILD_TIMEOUT_S = 600.0
_SOURCES = (
    "generate.py", "normal.py", "warmup.py", "compare.py", "oracles.py", "properties.py",
    "quick.py",
)  # fmt: skip


def _fingerprint() -> str:
    """Changes when the grader's kernels or the interpreter (and so CuPy) change."""
    digest = hashlib.sha256(sys.executable.encode())
    here = Path(__file__).resolve().parent
    for name in _SOURCES:
        digest.update((here / name).read_bytes())
    return digest.hexdigest()[:16]


def cache_folder() -> Path:
    """KERNELGRADER_KERNEL_CACHE_DIR, else beside the lock files (the worker's data dir)."""
    root = os.environ.get("KERNELGRADER_KERNEL_CACHE_DIR")
    return (Path(root) if root else lock_dir()) / f"kernelgrader-cupy-cache-{_fingerprint()}"


@functools.cache
def ensure_built() -> Path | None:
    """The trusted cache folder, built if need be and registered for GPU children; None if the
    build failed (children then compile what they need themselves, slower but correct)."""
    final = cache_folder()
    done = final / ".complete"
    if not done.exists():
        final.parent.mkdir(parents=True, exist_ok=True)
        with open(str(final) + ".lock", "w") as guard:
            fcntl.flock(guard, fcntl.LOCK_EX)  # another worker may be building it right now
            if not done.exists() and not _build(final):
                return None
    register_gpu_seed(".cupy", final)
    return final


def _build(final: Path) -> bool:
    """One trusted child per dtype, at once (NVRTC is single-threaded; the host has cores)."""
    staging = Path(tempfile.mkdtemp(prefix=final.name + "-", dir=final.parent))
    env = {**os.environ, "CUPY_CACHE_DIR": str(staging)}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    began = time.monotonic()
    from graders.spec.dtypes import ARRAY_DTYPES

    try:
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "graders.run.kernel_cache", str(staging), dtype],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for dtype in ARRAY_DTYPES
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
    kernels = len(list(staging.iterdir()))
    log.info(
        "built the CuPy kernel cache (%d kernels) in %.1f s", kernels, time.monotonic() - began
    )
    (staging / ".complete").touch()
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(final)
    staging.rename(final)
    return True


def _main(argv: list[str]) -> int:
    os.environ["CUPY_CACHE_DIR"] = argv[1]  # before CuPy is imported: it reads it then
    from graders.gpu import gpu_lock
    from graders.run.warmup import exercise

    with gpu_lock().shared():  # it runs kernels: not beside a timed section
        exercise(argv[2:] or None)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
