"""Whether this worker can run kernels, asked once per process."""

from __future__ import annotations

import functools

from app.core.settings import get_settings


@functools.cache
def run_unavailable_reason() -> str | None:
    """None when this worker has a GPU and the run stage; otherwise a sentence saying why not."""
    if not get_settings().run_on_gpu:
        return "Running on a GPU is switched off for this worker (KERNELGRADER_RUN_ON_GPU=false)."
    try:
        from graders.gpu import gpu_unavailable_reason
        from graders.grade import run_submission  # noqa: F401  (the run stage must be here)
    except ImportError as exc:
        return f"This worker has no GPU run stage installed ({exc})."
    return gpu_unavailable_reason()


def worker_arch() -> str:
    """The arch to compile for: this worker's GPU, else the configured default."""
    if run_unavailable_reason() is None:
        from graders.gpu import detect_arch

        arch = detect_arch()
        if arch:
            return arch
    return get_settings().default_arch


@functools.cache
def worker_gpu() -> tuple[str, str]:
    """(model name, driver version) of this worker's GPU, read without a CUDA context."""
    from graders.gpu import gpu_info

    info = gpu_info()
    return info.name, info.driver
