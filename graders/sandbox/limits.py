"""What one sandboxed child may use."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SandboxLimits:
    """What one sandboxed child may use; sizes in MiB, times in seconds."""

    wall_seconds: float
    cpu_seconds: int
    memory_mb: int | None
    max_open_files: int = 64
    max_processes: int = 256  # threads count too; only enforced when not root
    max_file_size_mb: int = 16
    stdout_limit_bytes: int = 65536
    network: bool = False
