"""NVML, where it is installed (nvidia-ml-py), and which GPU this process means.

Asking NVML creates no CUDA context, so the worker and the run stage's parent may ask it freely.
"""

from __future__ import annotations

import os
from typing import Any


def nvml() -> Any | None:
    """The initialised `pynvml` module, or None when NVML or the package is missing."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    return pynvml


def visible_index() -> int:
    """NVML numbers GPUs physically; CUDA_VISIBLE_DEVICES may renumber them for CUDA."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def visible_handle() -> tuple[Any, Any] | tuple[None, None]:
    """(the initialised `pynvml` module, the handle of this process's GPU), or (None, None)
    where NVML, the package or that GPU is missing."""
    nvml_module = nvml()
    if nvml_module is None:
        return None, None
    try:
        return nvml_module, nvml_module.nvmlDeviceGetHandleByIndex(visible_index())
    except Exception:
        return None, None
