"""scripts/device_wheels.py asks pip for wheels a GPU host (CPython 3.12, x86-64, glibc 2.39)
can install: the platform tags it passes must match the wheels that exist, NVIDIA's report
reader's among them."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from packaging.tags import compatible_tags, cpython_tags
from packaging.utils import parse_wheel_filename

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "device_wheels.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("device_wheels", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _accepted(platforms: list[str]) -> set[object]:
    """The tags pip takes with `--python-version 3.12 --implementation cp` and these
    `--platform`s."""
    return {
        *cpython_tags((3, 12), platforms=platforms),
        *compatible_tags((3, 12), "cp312", platforms),
    }


def test_the_profile_readers_manylinux_2_25_wheel_is_accepted() -> None:
    platforms = _script().PLATFORMS
    _, _, _, tags = parse_wheel_filename("ncu_report-2026.3.1-cp37-abi3-manylinux_2_25_x86_64.whl")
    assert tags & _accepted(platforms)


def test_no_wheel_newer_than_the_hosts_glibc_is_asked_for() -> None:
    platforms = _script().PLATFORMS
    _, _, _, tags = parse_wheel_filename("x-1.0-cp312-cp312-manylinux_2_40_x86_64.whl")
    assert not tags & _accepted(platforms)
    assert "manylinux_2_17_x86_64" in platforms and "manylinux2014_x86_64" in platforms
