"""Setting up the grading engine in a worker process: lock folder, kernel cache, warm children.

Done once when a worker starts (`kernelgrader worker`): where it has a GPU, the CuPy kernel
cache is built in a trusted child and a run child and a sanitizer child per concurrent job are
started ahead of need; every worker keeps compile children started ahead too.
"""

from __future__ import annotations

import logging

from app.core.settings import Settings

log = logging.getLogger(__name__)


def prepare_engine(settings: Settings, *, gpu: bool) -> None:
    from graders.sandbox import prestart

    # The GPU's timing lock lives in a host-wide folder (graders.gpu.lock_dir), whatever the
    # data folder: every worker of the host, in a container or not, takes the same one.
    if not settings.prestart:
        return
    spares = settings.worker_concurrency
    prestart.configure(
        prestart.PoolSpec("compile", gpu=False, warm="graders.compile.warm:load_nvrtc", spares=1)
    )
    if not gpu:
        return
    from graders.run.kernel_cache import ensure_built

    def cache() -> None:
        ensure_built()

    prestart.configure(
        prestart.PoolSpec(
            "run", gpu=True, warm="graders.run.child:warm_up", spares=spares, before_spawn=cache
        )
    )
    prestart.configure(
        prestart.PoolSpec(
            "sanitizer",
            gpu=True,
            warm="graders.sanitizer.child:warm_up",
            spares=spares,
            before_spawn=cache,
        )
    )
    log.info("prestarted %d run and sanitizer children and a compile child", spares)
