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


# Tests that hold a wall-clock limit or load the machine themselves (a sandbox's 2 s limit, a
# compile bomb that must meet its memory limit before its time limit, a rush whose uploads and
# /health must keep answering). scripts/test.sh runs the rest in two processes and these after
# them, alone, so the machine's other process cannot push them over their limits.
ALONE = (
    "tests/app/fleet/test_supervisor.py",
    "tests/app/lti/test_lms_requests.py",
    "tests/app/test_rush.py",
    "tests/graders/compile/test_compiler.py",
    "tests/graders/sandbox/",
    "tests/graders/sanitizer/test_beside.py",
    "tests/graders/timing/test_lock.py",
    "tests/security/test_compile_attacks.py",
    "tests/security/test_hostile_kernels.py",
)


# Before xdist's own hook reads the groups (scripts/test.sh: `-n 2 --dist loadgroup`).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(__file__).resolve().parent.parent
    place = {item: item.path.resolve().relative_to(root).as_posix() for item in items}
    # The two processes of scripts/test.sh take every other test file, in order: the same files
    # in the same order on every run (xdist's own choice depends on which process is free
    # first), so a run here is the run CI makes. About even in time: 861 s and 932 s measured.
    files = sorted({where for where in place.values() if not where.startswith(ALONE)})
    half = {where: f"half{index % 2}" for index, where in enumerate(files)}
    grouped = config.pluginmanager.hasplugin("xdist")
    reason = None
    for item in items:
        where = place[item]
        if where.startswith(ALONE):
            item.add_marker(pytest.mark.alone)
        elif grouped:
            item.add_marker(pytest.mark.xdist_group(half[where]))
        if "gpu" in item.keywords:
            reason = reason or gpu_unavailable_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"needs a GPU: {reason}"))
