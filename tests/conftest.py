"""Shared test configuration: the `gpu` marker skips, with its reason, where no GPU is usable.

Imports only the standard library here, so `pytest -m gpu tests/graders` runs on a bare GPU
host that has NumPy and CuPy but not the web stack.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest


@functools.cache
def gpu_unavailable_reason() -> str | None:
    try:
        import cupy
    except ImportError as exc:
        return f"CuPy is not installed ({exc})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDA raises its own error types when no driver is present
        return f"no usable NVIDIA GPU: {exc}"
    if count < 1:
        return "no NVIDIA GPU on this machine"
    return None


def command_lines_with(text: str) -> list[str]:
    """Command lines (arguments joined by spaces) of this host's live processes that contain
    `text`: what a test started and expects gone."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline:
            found.append(cmdline)
    return found


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = None
    for item in items:
        if "gpu" in item.keywords:
            reason = reason or gpu_unavailable_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"needs a GPU: {reason}"))
