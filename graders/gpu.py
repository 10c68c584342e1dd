"""The worker's GPU: is one usable, which architecture, its clocks, its health, and its lock.

Nothing here creates a CUDA context in the calling process: the worker that asks these
questions must stay free of CUDA state, so probes run through NVML (when `nvidia-ml-py` is
installed) or in a short-lived child process.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from graders.nvml import nvml as _nvml
from graders.nvml import visible_handle
from graders.nvml import visible_index as _visible_index
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
    nvml, handle = visible_handle()
    if nvml is not None:
        try:
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


def nvidia_smi(*args: str, timeout: float = 20) -> subprocess.CompletedProcess[str] | None:
    """nvidia-smi run with `args`; None where it is not installed or did not finish in time."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        return subprocess.run(
            [exe, *args], capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def _nvidia_smi_info() -> GpuInfo | None:
    fields = "name,clocks.sm,clocks.max.sm,temperature.gpu,driver_version"
    done = nvidia_smi(
        f"--query-gpu={fields}", "--format=csv,noheader,nounits", f"-i={_visible_index()}"
    )
    if done is None:
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
    nvml, handle = visible_handle()
    if nvml is not None:
        try:
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


def sm_clock_mhz(*, most: bool = False) -> int | None:
    """The GPU's SM clock now (`most`: the most it may run at), from NVML alone (None without
    it): cheap enough to ask inside a timed section, where nvidia-smi's process is not."""
    nvml, handle = visible_handle()
    if nvml is None:
        return None
    try:
        ask = nvml.nvmlDeviceGetMaxClockInfo if most else nvml.nvmlDeviceGetClockInfo
        return int(ask(handle, nvml.NVML_CLOCK_SM))
    except Exception:
        return None


def gpu_process_ids() -> set[int] | None:
    """The pids running compute work on this worker's GPU, as NVML (or nvidia-smi) lists them;
    None where neither can tell. In a container they may be the host's pids."""
    nvml, handle = visible_handle()
    if nvml is not None:
        try:
            return {int(p.pid) for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)}
        except Exception:
            pass
    done = nvidia_smi("--query-compute-apps=pid", "--format=csv,noheader", f"-i={_visible_index()}")
    if done is None or done.returncode != 0:
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


# Where the GPUs' timing locks live unless KERNELGRADER_LOCK_DIR says otherwise: a host path,
# never the data folder, so every worker process and container of the host (compose mounts
# it) takes the same lock for the same GPU. The first that is or can be made usable wins.
HOST_LOCK_DIRS = (
    Path("/run/lock/kernelgrader"),
    Path("/var/lock/kernelgrader"),
    Path("/tmp/kernelgrader-locks"),
)
LOCK_DIR_MODE = 0o1777  # workers of different users share it; the sticky bit keeps files theirs


def _usable_lock_dir(folder: Path) -> bool:
    """True when `folder` exists (made here, world-writable and sticky, if need be) and this
    process may make lock files in it."""
    if not folder.is_dir():
        try:
            folder.mkdir()
        except FileExistsError:
            pass  # another worker made it just now
        except OSError:
            return False
        else:
            with contextlib.suppress(OSError):
                folder.chmod(LOCK_DIR_MODE)  # mkdir's mode is cut by the umask
    return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)


def host_lock_dir(candidates: tuple[Path, ...] = HOST_LOCK_DIRS) -> Path:
    """The first usable of `candidates`; the last one where none is (a lock it cannot create
    files in then fails loudly, at the lock)."""
    for folder in candidates:
        if _usable_lock_dir(folder):
            return folder
        if folder.is_dir():
            log.warning(
                "%s exists but this user cannot make lock files in it, so timed sections are "
                "not kept apart from workers that use it; make it world-writable with the "
                "sticky bit (chmod 1777 %s)",
                folder,
                folder,
            )
    return candidates[-1]


def lock_dir() -> Path:
    """Where the per-GPU lock files live: KERNELGRADER_LOCK_DIR, else a host-wide folder
    (HOST_LOCK_DIRS), whatever the worker's data folder."""
    folder = os.environ.get("KERNELGRADER_LOCK_DIR")
    if folder:
        return Path(folder).resolve()
    return host_lock_dir()


def _clean_key(text: str) -> str:
    return "".join(c for c in text if c.isalnum() or c == "-")


@functools.cache
def _physical_gpu(visible: str) -> str:
    """The UUID of the GPU that CUDA_VISIBLE_DEVICES=`visible` makes device 0, where NVML or
    nvidia-smi can tell; "" otherwise. (A worker of `worker --gpus` numbers GPUs as NVML does:
    the supervisor sets CUDA_DEVICE_ORDER=PCI_BUS_ID.)"""
    nvml, handle = visible_handle()
    if nvml is not None:
        try:
            uuid = nvml.nvmlDeviceGetUUID(handle)
            return _clean_key(uuid.decode() if isinstance(uuid, bytes) else str(uuid))
        except Exception:
            pass
    done = nvidia_smi("--query-gpu=uuid", "--format=csv,noheader", f"-i={_visible_index()}")
    if done is None:
        return ""
    uuid = done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout else ""
    return _clean_key(uuid) if uuid.startswith(("GPU-", "MIG-")) else ""


def gpu_key() -> str:
    """A name for the physical GPU, the same in every process whatever CUDA_VISIBLE_DEVICES
    says: its UUID. KERNELGRADER_GPU_KEY, where set (a worker gives it to its GPU children),
    says it outright."""
    given = os.environ.get("KERNELGRADER_GPU_KEY")
    if given:
        return _clean_key(given)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    first = visible.split(",")[0].strip()
    if first and not first.isdigit():
        return _clean_key(first)  # the GPU's (or MIG instance's) own UUID
    uuid = _physical_gpu(visible)
    if uuid:
        return uuid
    # Neither NVML nor nvidia-smi: the index, so workers given different GPUs (`worker --gpus`)
    # take different locks.
    return f"gpu{_visible_index()}"


def gpu_lock(directory: Path | str | None = None, *, key: str | None = None) -> GpuLock:
    """The host-wide reader-writer lock of this worker's GPU (graders.timing.lock)."""
    return GpuLock(Path(directory) if directory else lock_dir(), key or gpu_key())
