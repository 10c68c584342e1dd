"""The worker's GPU: is one usable, which architecture, its clocks, its health, and its lock.

Nothing here creates a CUDA context in the calling process: the worker that asks these
questions must stay free of CUDA state, so probes run through NVML (when `nvidia-ml-py` is
installed) or in a short-lived child process.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from graders.results import GpuInfo
from graders.timing.lock import GpuLock

log = logging.getLogger(__name__)

# A child that imports CuPy and touches the device takes a few seconds; a hung driver must
# not stall the worker forever.
PROBE_TIMEOUT_S = 60.0
# After a kill, how long the killed process may take to leave the GPU (the driver tears its
# context down after the process is gone) before the health probe runs anyway.
LEAVE_GPU_LIMIT_S = 30.0
# A failed health probe is tried once more after this pause before the GPU is called unhealthy.
HEALTH_RETRY_PAUSE_S = 5.0

_PROBE_SCRIPT = r"""
import json, sys
try:
    import cupy
except Exception as exc:
    print(json.dumps({"error": "CuPy cannot be imported (%s)" % exc})); sys.exit(0)
try:
    n = cupy.cuda.runtime.getDeviceCount()
except Exception as exc:
    print(json.dumps({"error": "no usable NVIDIA GPU (%s)" % exc})); sys.exit(0)
if n < 1:
    print(json.dumps({"error": "no NVIDIA GPU on this machine"})); sys.exit(0)
out = {"count": n}
try:
    props = cupy.cuda.runtime.getDeviceProperties(0)
    out["name"] = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    out["arch"] = "sm_%d%d" % (props["major"], props["minor"])
    out["driver"] = str(cupy.cuda.runtime.driverGetVersion())
    if "--health" in sys.argv:
        x = cupy.arange(1 << 20, dtype=cupy.float64)
        s = float((x * 2.0).sum())
        want = float((1 << 20) * ((1 << 20) - 1))
        cupy.cuda.Device(0).synchronize()
        if s != want:
            out["error"] = "a test computation gave %r instead of %r" % (s, want)
except Exception as exc:
    out["error"] = "the GPU did not answer a simple request (%s)" % exc
print(json.dumps(out))
"""


def _nvml() -> Any | None:
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


def _probe(health: bool = False) -> dict[str, Any]:
    """Ask a child process about GPU 0; never raises."""
    args = [sys.executable, "-c", _PROBE_SCRIPT] + (["--health"] if health else [])
    try:
        done = subprocess.run(
            args, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return {"error": f"the GPU did not answer within {PROBE_TIMEOUT_S:.0f} s"}
    except OSError as exc:
        return {"error": f"a GPU probe process could not start ({exc})"}
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (done.stderr or "").strip().splitlines()[-1:] or ["no output"]
        return {"error": f"the GPU probe process failed ({tail[0]})"}
    try:
        return dict(json.loads(lines[-1]))
    except ValueError:
        return {"error": "the GPU probe process printed something unreadable"}


@functools.cache
def _cached_probe() -> dict[str, Any]:
    return _probe()


def gpu_unavailable_reason() -> str | None:
    """None when a GPU can run kernels here; otherwise a sentence saying why not."""
    nvml = _nvml()
    if nvml is not None:
        try:
            if nvml.nvmlDeviceGetCount() < 1:
                return "There is no NVIDIA GPU on this machine."
        except Exception:
            pass
    try:
        import cupy  # noqa: F401
    except ImportError as exc:
        return f"CuPy is not installed ({exc}); install kernelgrader[cuda13] on a GPU worker."
    err = _cached_probe().get("error")
    return f"No GPU can run kernels here: {err}." if err else None


def detect_arch() -> str | None:
    """The architecture of GPU 0 as NVRTC names it ("sm_90"), or None without a GPU."""
    nvml = _nvml()
    if nvml is not None:
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(_visible_index())
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
            return f"sm_{major}{minor}"
        except Exception:
            pass
    try:
        import cupy  # noqa: F401
    except ImportError:
        return None
    arch = _cached_probe().get("arch")
    return str(arch) if arch else None


def _visible_index() -> int:
    """NVML numbers GPUs physically; CUDA_VISIBLE_DEVICES may renumber them for CUDA."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def _nvidia_smi_info() -> GpuInfo | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    fields = "name,clocks.sm,clocks.max.sm,temperature.gpu,driver_version"
    try:
        done = subprocess.run(
            [
                exe,
                f"--query-gpu={fields}",
                "--format=csv,noheader,nounits",
                f"-i={_visible_index()}",
            ],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = (
        [p.strip() for p in done.stdout.strip().splitlines()[0].split(",")] if done.stdout else []
    )
    if len(parts) != 5:
        return None

    def num(text: str) -> int | None:
        return int(float(text)) if text.replace(".", "", 1).isdigit() else None

    return GpuInfo(
        name=parts[0],
        sm_clock_mhz=num(parts[1]),
        max_sm_clock_mhz=num(parts[2]),
        temperature_c=num(parts[3]),
        driver=parts[4],
    )


def gpu_info() -> GpuInfo:
    """Name, SM clock, max SM clock, temperature and driver of the worker's GPU, now."""
    info = GpuInfo()
    nvml = _nvml()
    if nvml is not None:
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(_visible_index())
            name = nvml.nvmlDeviceGetName(handle)
            info.name = name.decode() if isinstance(name, bytes) else str(name)
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
            info.arch = f"sm_{major}{minor}"
            info.sm_clock_mhz = int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
            info.max_sm_clock_mhz = int(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM))
            info.temperature_c = int(
                nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
            )
            driver = nvml.nvmlSystemGetDriverVersion()
            info.driver = driver.decode() if isinstance(driver, bytes) else str(driver)
            return info
        except Exception:
            pass  # fall through to nvidia-smi: some fields may be unsupported on this GPU
    smi = _nvidia_smi_info()
    if smi is not None:
        smi.arch = detect_arch() or ""
        return smi
    info.arch = detect_arch() or ""
    return info


def gpu_process_ids() -> set[int] | None:
    """The pids running compute work on this worker's GPU, as NVML (or nvidia-smi) lists them;
    None where neither can tell. In a container they may be the host's pids."""
    nvml = _nvml()
    if nvml is not None:
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(_visible_index())
            return {int(p.pid) for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)}
        except Exception:
            pass
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = subprocess.run(
            [exe, "--query-compute-apps=pid", "--format=csv,noheader", f"-i={_visible_index()}"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return {int(line) for line in done.stdout.split() if line.strip().isdigit()}


def wait_until_off_gpu(pid: int, limit_s: float = LEAVE_GPU_LIMIT_S) -> bool:
    """Wait (at most `limit_s`) until `pid` no longer runs on the GPU; False if it still does."""
    deadline = time.monotonic() + limit_s
    while True:
        running = gpu_process_ids()
        if running is None or pid not in running:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def check_gpu_health(killed_pid: int | None = None) -> str | None:
    """None when a fresh process can compute correctly on the GPU; else a sentence.

    After a kill (`killed_pid`), the probe waits until that process has left the GPU: a probe
    beside a context still being torn down can fail on a healthy GPU. A failed probe is tried
    once more after a pause before the GPU is called unhealthy.
    """
    if killed_pid is not None and not wait_until_off_gpu(killed_pid):
        log.warning(
            "process %d was still on the GPU %.0f s after it was killed",
            killed_pid,
            LEAVE_GPU_LIMIT_S,
        )
    result = _probe(health=True)
    if result.get("error"):
        log.warning(
            "GPU health probe failed (%s); trying again in %.0f s",
            result["error"],
            HEALTH_RETRY_PAUSE_S,
        )
        time.sleep(HEALTH_RETRY_PAUSE_S)
        result = _probe(health=True)
    if result.get("error"):
        return (
            f"The GPU is not healthy: {result['error']}. Grading is paused on this worker; "
            "an administrator should check the GPU (nvidia-smi) or restart the worker."
        )
    return None


def lock_dir() -> Path:
    """Where the per-GPU lock files (and the CuPy kernel cache) live: shared by every worker
    process on the host, and by the run stage's children (KERNELGRADER_LOCK_DIR)."""
    for name in ("KERNELGRADER_LOCK_DIR", "KERNELGRADER_DATA_DIR"):
        folder = os.environ.get(name)
        if folder:
            return Path(folder).resolve()
    return Path(tempfile.gettempdir())


def gpu_key() -> str:
    """A name for the physical GPU, the same in every process whatever CUDA_VISIBLE_DEVICES says."""
    nvml = _nvml()
    if nvml is not None:
        try:
            uuid = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(_visible_index()))
            uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
            return "".join(c for c in uuid if c.isalnum() or c == "-")
        except Exception:
            pass
    # Without NVML: the device as CUDA_VISIBLE_DEVICES names it, a UUID as well as an index,
    # so workers of one host given different GPUs (`worker --gpus`) take different locks.
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if first and not first.isdigit():
        return "".join(c for c in first if c.isalnum() or c == "-")
    return f"gpu{_visible_index()}"


def gpu_lock(directory: Path | str | None = None, *, key: str | None = None) -> GpuLock:
    """The host-wide reader-writer lock of this worker's GPU (graders.timing.lock)."""
    return GpuLock(Path(directory) if directory else lock_dir(), key or gpu_key())
