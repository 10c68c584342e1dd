"""The engine's settings: the few values a worker hands the engine, in one place.

The service reads its settings once (app.core.settings.Settings, from KERNELGRADER_* variables
and `.env` files) and hands the engine an `EngineSettings` (`Settings.engine()`); the engine's
modules read none of these variables themselves. The engine's own command line (`python -m
graders`) has no service around it, so it reads the same variables and `.env` files here
(`from_environment`), with the same defaults: a lab graded, checked or profiled there draws the
hidden cases a worker of the same install draws.

Standard library only, as all of graders/'s top level.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# Mixed into hidden cases' seeds where no KERNELGRADER_GRADING_SECRET is set: the development
# default, which the service refuses outside development.
DEV_GRADING_SECRET = "dev-grading-secret"
# The architecture to compile for where no GPU says its own.
FALLBACK_ARCH = "sm_90"
# GPU memory a worker leaves free when it admits gradings, and gradings at once on one GPU.
DEFAULT_RESERVE_MB = 2048
DEFAULT_GPU_JOBS = 3


@dataclass(frozen=True)
class EngineSettings:
    """What the engine is told, rather than reading it from the environment itself."""

    grading_secret: str = DEV_GRADING_SECRET
    default_arch: str = FALLBACK_ARCH
    gpu_memory_reserve_mb: int = DEFAULT_RESERVE_MB
    # Gradings at once on one GPU, across every worker of the host (0: no cap).
    gpu_jobs: int = DEFAULT_GPU_JOBS

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> EngineSettings:
        """For the engine's command line: KERNELGRADER_GRADING_SECRET, _DEFAULT_ARCH,
        _GPU_MEMORY_RESERVE_MB and _GPU_JOBS from the environment, else from a `.env` file in
        the checkout or the working directory (as the service reads them), else the defaults."""
        values = {**_dotenv(), **(os.environ if environ is None else environ)}

        def number(name: str, default: int) -> int:
            text = values.get(name, "").strip()
            return int(text) if text.isdigit() else default

        return cls(
            grading_secret=values.get("KERNELGRADER_GRADING_SECRET") or DEV_GRADING_SECRET,
            default_arch=values.get("KERNELGRADER_DEFAULT_ARCH", "").strip() or FALLBACK_ARCH,
            gpu_memory_reserve_mb=number("KERNELGRADER_GPU_MEMORY_RESERVE_MB", DEFAULT_RESERVE_MB),
            gpu_jobs=number("KERNELGRADER_GPU_JOBS", DEFAULT_GPU_JOBS),
        )


# What the engine is told where no worker passes its settings (a test, a library caller).
DEFAULTS = EngineSettings()


def _dotenv() -> dict[str, str]:
    """KERNELGRADER_* lines of the `.env` files the service reads: the checkout's, then the
    working directory's (which wins where both set a value)."""
    root = Path(__file__).resolve().parents[1]
    files = [Path(".env")]
    if (root / "pyproject.toml").is_file() and (root / "reference_kernels").is_dir():
        files.insert(0, root / ".env")
    values: dict[str, str] = {}
    for path in files:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        for line in lines:
            line = line.strip().removeprefix("export ").strip()
            name, sep, value = line.partition("=")
            if not sep or not name.strip().startswith("KERNELGRADER_"):
                continue
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            values[name.strip()] = value
    return values
