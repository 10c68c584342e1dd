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


# Where NVIDIA's packages install Nsight Compute, one folder per version (the apt repository's
# nsight-compute-<version>, and the CUDA toolkit's installers).
INSTALL_ROOTS = ("/opt/nvidia/nsight-compute",)
_WRAPPER_LIMIT = 64 * 1024
_INSTALL_IN_TEXT = re.compile(r"(/[^\s\"'`;|&$]*nsight-compute[^\s\"'`;|&$]*)")


def _version_key(folder: Path) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", folder.name))


def _named_in_wrapper(program: Path) -> list[Path]:
    """The Nsight Compute folders a wrapper script names: /usr/local/cuda/bin/ncu is a small
    shell script that runs the ncu of an install elsewhere (/opt/nvidia/nsight-compute/<version>
    or the toolkit's nsight-compute-<version>)."""
    try:
        with program.open("rb") as f:
            head = f.read(_WRAPPER_LIMIT)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    text = head.decode("utf-8", "replace")
    named = [Path(m.group(1)) for m in _INSTALL_IN_TEXT.finditer(text)]
    # The path of its ncu, or of the install: the install is whichever of them holds the reader.
    return [p for path in named for p in (path, *path.parents) if "nsight-compute" in str(p)]


def reader_folders(program: str | None) -> list[str]:
    """Folders that may hold the ncu_report module shipped with this ncu (extras/python): beside
    the program it resolves to, in the install a wrapper script names, in the toolkit's
    nsight-compute-<version> folders, and in every version under INSTALL_ROOTS, newest first."""
    if not program:
        return []
    real = Path(os.path.realpath(program))
    installs = [real.parent, *_named_in_wrapper(real)]
    # /usr/local/cuda/bin/ncu is a wrapper of /usr/local/cuda/nsight-compute-<version>/ncu.
    root = real.parent.parent
    toolkit = [Path(p) for p in glob.glob(f"{root}/nsight-compute-*")]
    installs += sorted(toolkit, key=_version_key, reverse=True)
    for base in INSTALL_ROOTS:
        versions = [p for p in Path(base).glob("*") if p.is_dir()] if Path(base).is_dir() else []
        installs += sorted(versions, key=_version_key, reverse=True)
    candidates = [folder / "extras" / "python" for folder in installs]
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
