"""What one sandboxed child may use, and how the child holds itself to it."""

from __future__ import annotations

import math
import os
import resource
from dataclasses import dataclass
from typing import Any

MIB = 1024 * 1024


@dataclass(frozen=True)
class SandboxLimits:
    """What one sandboxed child may use; sizes in MiB, times in seconds."""

    wall_seconds: float
    cpu_seconds: int
    memory_mb: int | None
    max_open_files: int = 64
    max_processes: int = 256  # threads count too; only enforced when not root
    max_file_size_mb: int = 16
    stdout_limit_bytes: int = 65536  # kept to show; the rest is read and dropped
    # Printing past either of these ends the child (reason "printing"): a flood, or a printf
    # the driver expands for minutes, must not hold a worker. Seconds of printing count the
    # bursts of output (chunks less than PRINT_GAP_S apart), not the quiet between them.
    print_limit_bytes: int = 4 * MIB
    print_limit_seconds: float = 20.0
    network: bool = False

    def for_request(self, *, gpu: bool, nproc: bool) -> dict[str, Any]:
        """The limits a child applies to itself when its request arrives."""
        return {
            "cpu_seconds": self.cpu_seconds,
            "memory_mb": self.memory_mb,
            "memory_kind": "data" if gpu else "as",
            "max_open_files": self.max_open_files,
            "max_file_size_mb": self.max_file_size_mb,
            "max_processes": self.max_processes if nproc else None,
        }


def _lower(kind: int, soft: int, hard: int | None = None) -> None:
    """Set a limit no higher than it is now (a process may always lower its own limits)."""
    cur_soft, cur_hard = resource.getrlimit(kind)
    hard = soft if hard is None else hard
    if cur_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, cur_hard), min(hard, cur_hard)
    resource.setrlimit(kind, (soft, hard))


def _in_use_mib(field: str) -> int:
    """VmSize or VmData of this process, in MiB (0 where /proc says nothing)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError):
        pass
    return 0


def apply_request_limits(spec: dict[str, Any], *, cpu_used: float, warmed: bool = False) -> None:
    """In the child, before the target runs: the request's limits, counted from now.

    A child started ahead of need (`warmed`) was spawned with room for its warm-up; the CPU
    limit here counts only what the request uses from now on, and the memory limit counts what
    the request maps on top of what the warm-up already mapped (a compiler library loaded ahead
    may hold gigabytes of address space that a fresh child would have mapped within its limit).
    """
    if spec.get("cpu_seconds"):
        soft = math.ceil(cpu_used + float(spec["cpu_seconds"]))
        # SIGXCPU at the soft limit, SIGKILL a second later if it is ignored.
        _lower(resource.RLIMIT_CPU, soft, soft + 1)
    if spec.get("memory_mb"):
        data = spec.get("memory_kind") == "data"
        kind = resource.RLIMIT_DATA if data else resource.RLIMIT_AS
        held = _in_use_mib("VmData" if data else "VmSize") if warmed else 0
        _lower(kind, (held + int(spec["memory_mb"])) * MIB)
    if spec.get("max_open_files"):
        _lower(resource.RLIMIT_NOFILE, int(spec["max_open_files"]))
    if spec.get("max_file_size_mb"):
        _lower(resource.RLIMIT_FSIZE, int(spec["max_file_size_mb"]) * MIB)
    if spec.get("max_processes") and os.geteuid() != 0:
        _lower(resource.RLIMIT_NPROC, int(spec["max_processes"]))
