"""Setting up the grading engine in a worker process: kernel cache, zygotes, warm children.

Done once when a worker starts (`kernelgrader worker`), before it takes a job: where it has a
GPU, the CuPy kernel cache and the sanitizer's launcher are found built (`python -m graders
warm-cache`, or an earlier worker) or built now, the zygotes that fork every child start, and a
run child and a sanitizer child per concurrent job are started ahead of need (forked, each then
making its own context); every worker keeps compile children started ahead too. The
GPU's timing lock needs no setting up: it lives in a host-wide folder (graders.gpu.lock_dir),
whatever the data folder, so every worker of the host, in a container or not, takes the same.
"""

from __future__ import annotations

import logging
import time

from app.core.settings import Settings
from graders.sandbox import prestart, zygotes
from graders.sanitizer.launcher import ensure_built

log = logging.getLogger(__name__)


def prepare_kernel_cache() -> None:
    """The CuPy kernel cache, ready before the first job: found built, or built now."""
    from graders.run.kernel_cache import ensure_built

    began = time.monotonic()
    state = ensure_built()
    if state.folder is None:
        log.warning("gradings start without a CuPy kernel cache: %s", state.why_not)
    elif state.built_now:
        log.info(
            "built the CuPy kernel cache before taking jobs, in %.1f s (`python -m graders "
            "warm-cache` builds it ahead): %s",
            state.seconds,
            state.folder,
        )
    else:
        log.info(
            "found the CuPy kernel cache built, in %.2f s: %s",
            time.monotonic() - began,
            state.folder,
        )


def prepare_sanitizer() -> None:
    """The sanitizer's native launcher, built before the first job where a compiler is."""
    state = ensure_built()
    if state.path is not None:
        log.info("the sanitizer's launcher: %s", state.path)


def prepare_engine(settings: Settings, *, gpu: bool) -> None:
    if gpu:
        prepare_kernel_cache()  # the children started below copy it
        prepare_sanitizer()  # likewise
    # Every child is forked from a zygote of its kind that imported what it needs and never
    # touched CUDA: its context is made after the fork, its own (graders.sandbox.zygote).
    zygotes.enable(start=("cpu", "gpu") if gpu else ("cpu",))
    if not settings.prestart:
        return
    spares = settings.worker_concurrency
    prestart.configure(
        prestart.PoolSpec("compile", gpu=False, warm="graders.compile.warm:load_nvrtc", spares=1)
    )
    if not gpu:
        return
    prestart.configure(
        prestart.PoolSpec("run", gpu=True, warm="graders.run.child:warm_up", spares=spares)
    )
    prestart.configure(
        prestart.PoolSpec(
            "sanitizer", gpu=True, warm="graders.sanitizer.child:warm_up", spares=spares
        )
    )
    log.info("prestarted %d run and sanitizer children and a compile child", spares)
