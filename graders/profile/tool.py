"""Where Nsight Compute is, whether it can profile here, and how it is called.

Profiling needs three things on the GPU host: the `ncu` program (it comes with the CUDA
toolkit, or as NVIDIA's Nsight Compute package), permission to read the GPU's performance
counters (root, or the driver loaded with `NVreg_RestrictProfilingToAdminUsers=0`), and a
whole GPU (on a MIG slice the counters cannot be read for one slice alone). Where one is
missing, `unavailable_reason` says so in one sentence and the grading is otherwise unchanged.

The profile never changes the GPU's clocks (`--clock-control none`): a shared GPU's other
gradings must not run at locked clocks. Its durations are therefore not comparable with the
graded timings, and nothing compares them.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
from pathlib import Path

from graders.nvml import visible_handle

# The sections the findings read: throughput against peak, memory access patterns and shared
# memory, occupancy and its limits, the launch, warp stalls and divergence, per-line counters.
SECTIONS = (
    "SpeedOfLight",
    "MemoryWorkloadAnalysis_Tables",
    "Occupancy",
    "LaunchStats",
    "WarpStateStats",
    "SourceCounters",
)
# The most launches of one program profiled (a multi-pass lab has a few).
MAX_LAUNCHES = 8

_KNOWN = (
    "/usr/local/cuda/bin/ncu",
    "/opt/cuda/bin/ncu",
    "/opt/nvidia/nsight-compute/*/ncu",
    "/usr/local/cuda/nsight-compute-*/ncu",
)

# One sentence each, for the submission's page (staff find the remedy in the README,
# "Profiling"); the grading itself is complete without a profile.
COUNTERS_NOT_PERMITTED = (
    "This GPU worker may not read the GPU's performance counters (ERR_NVGPUCTRPERM), so the "
    "kernel was not profiled; its grading is complete without it."
)
NOT_INSTALLED = (
    "This GPU worker has no Nsight Compute (ncu), so the kernel was not profiled; its grading "
    "is complete without it."
)
MIG_SLICE = (
    "This GPU worker runs on a MIG slice, whose performance counters Nsight Compute cannot "
    "read for one slice alone, so the kernel was not profiled; its grading is complete "
    "without it."
)
# A worker's profiling job stops when a timed section waits for the GPU, and runs again later
# (graders.profile.child): its status and the sentence for the worker's log.
YIELDED = "yielded"
YIELDED_MESSAGE = (
    "Profiling stopped to let a grading's timed section have the GPU; it runs again later."
)
NO_READER = (
    "This GPU worker cannot read Nsight Compute's reports (NVIDIA's ncu-report package is "
    "missing), so the kernel's profile is not shown; its grading is complete without it."
)


def executable() -> str | None:
    """The ncu program: KERNELGRADER_NCU, PATH, or the toolkit's usual homes."""
    configured = os.environ.get("KERNELGRADER_NCU")
    if configured and os.access(configured, os.X_OK):
        return configured
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in _KNOWN:
        for candidate in sorted(glob.glob(pattern), reverse=True):
            if os.access(candidate, os.X_OK):
                return candidate
    return None


def on_mig_slice() -> bool:
    """Whether this worker's GPU is a MIG slice (its CUDA device named MIG-..., or MIG on)."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if first.startswith("MIG-"):
        return True
    nvml, handle = visible_handle()
    if nvml is None:
        return False
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
        return bool(current == nvml.NVML_DEVICE_MIG_ENABLE)
    except Exception:  # no MIG support on this GPU or driver: a whole GPU
        return False


def reader_folders(program: str | None) -> list[str]:
    """Folders that may hold the ncu_report module shipped with this ncu (extras/python)."""
    if not program:
        return []
    real = Path(os.path.realpath(program))
    candidates = [real.parent / "extras" / "python"]
    # /usr/local/cuda/bin/ncu is a wrapper of /usr/local/cuda/nsight-compute-<version>/ncu.
    root = real.parent.parent
    candidates += [Path(p) / "extras" / "python" for p in glob.glob(f"{root}/nsight-compute-*")]
    found = [str(c) for c in candidates if (c / "ncu_report.py").is_file()]
    return list(dict.fromkeys(found))


def unavailable_reason() -> str | None:
    """None when this worker can profile; else one sentence saying why not."""
    if executable() is None:
        return NOT_INSTALLED
    if on_mig_slice():
        return MIG_SLICE
    return None


_PERMISSION = re.compile(r"ERR_NVGPUCTRPERM")
_VERSION = re.compile(r"Version\s+(\d{4}\.\d+(?:\.\d+)*)")


def counters_refused(output: str) -> bool:
    """Whether ncu's output says the user may not read the performance counters."""
    return bool(_PERMISSION.search(output))


def version_of(output: str) -> str:
    """ncu's version from `ncu --version` ("2025.3.1.0"), or ""."""
    m = _VERSION.search(output)
    return m.group(1) if m else ""


def kernel_filter(kernels: tuple[str, ...] | list[str]) -> str:
    """--kernel-name's exact-match regex for the lab's kernels (extern "C": unmangled)."""
    return "regex:^(" + "|".join(re.escape(k) for k in kernels) + ")$"


def command(
    program: str,
    *,
    report: str,
    kernels: tuple[str, ...] | list[str],
    launches: int,
    source_folder: str,
    target: list[str],
) -> list[str]:
    """The ncu command that profiles only the lab's kernels inside the target's profiler range.

    The target calls cudaProfilerStart/Stop around the timed case's launches
    (`--profile-from-start off`), so CuPy's own kernels (input generation, comparisons) are
    never profiled, nor the lab's kernels outside that range.
    """
    cmd = [
        program,
        "--clock-control",
        "none",
        "--profile-from-start",
        "off",
        "--target-processes",
        "application-only",
        "--kernel-name-base",
        "function",
        "--kernel-name",
        kernel_filter(kernels),
        "--launch-count",
        str(max(1, min(launches, MAX_LAUNCHES))),
        "--import-source",
        "yes",
        "--source-folders",
        source_folder,
        "--check-exit-code",
        "yes",
        "-f",
        "-o",
        report,
    ]
    for section in SECTIONS:
        cmd += ["--section", section]
    return cmd + target
