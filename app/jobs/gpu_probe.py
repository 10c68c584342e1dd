"""What this worker can do, asked once per process: compile with NVRTC, run on a GPU, which GPU.

The probes that load CUDA libraries run in a short-lived child process, so the worker itself
holds no CUDA state (see graders.gpu).
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys

from app.core.settings import get_settings

PROBE_TIMEOUT_S = 60.0

CUDA_EXTRA = (
    "install the CUDA extra with `pip install 'kernelgrader[cuda13]'` "
    "(`kernelgrader[cuda12]` on hosts whose NVIDIA driver is CUDA 12)"
)

# The compile stage's own path: the NVRTC binding, a program, a cubin for the target arch.
_COMPILE_PROBE = r"""
import json, sys
try:
    try:
        from cupy_backends.cuda.libs import nvrtc
    except ImportError:
        from cupy.cuda import nvrtc
except Exception as exc:
    print(json.dumps({"error": "CuPy is not installed (%s)" % exc})); sys.exit(0)
try:
    program = nvrtc.createProgram('extern "C" __global__ void probe(float* x) { x[0] = 1.0f; }',
                                  "probe.cu", [], [])
    nvrtc.compileProgram(program, ["--gpu-architecture=" + sys.argv[1]])
    size = len(nvrtc.getCUBIN(program))
    version = ".".join(str(v) for v in nvrtc.getVersion())
except Exception as exc:
    print(json.dumps({"error": "NVRTC could not compile a test kernel (%s)" % exc})); sys.exit(0)
print(json.dumps({"nvrtc": version, "cubin_bytes": size}))
"""


@functools.cache
def compile_unavailable_reason() -> str | None:
    """None when NVRTC compiles here; otherwise what is missing, as a clause."""
    arch = get_settings().default_arch
    try:
        done = subprocess.run(
            [sys.executable, "-c", _COMPILE_PROBE, arch],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"a test compile did not finish within {PROBE_TIMEOUT_S:.0f} s"
    except OSError as exc:
        return f"a test compile could not start ({exc})"
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (done.stderr or "").strip().splitlines()[-1:] or ["no output"]
        return f"a test compile failed ({tail[0]})"
    error = json.loads(lines[-1]).get("error")
    return str(error) if error else None


def cannot_compile_sentence(reason: str) -> str:
    """Why a worker refuses to start, and what to install, in one sentence."""
    return (
        f"This worker cannot compile kernels ({reason}), so it did not start: "
        f"{CUDA_EXTRA}, then start it again."
    )


@functools.cache
def run_unavailable_reason() -> str | None:
    """None when this worker has a GPU and the run stage; otherwise a sentence saying why not."""
    if not get_settings().run_on_gpu:
        return "Running on a GPU is switched off for this worker (KERNELGRADER_RUN_ON_GPU=false)."
    try:
        from graders.gpu import gpu_unavailable_reason
        from graders.grade import run_submission  # noqa: F401  (the run stage must be here)
    except ImportError as exc:
        return f"This worker has no GPU run stage installed ({exc})."
    return gpu_unavailable_reason()


@functools.cache
def worker_gpu_model() -> str:
    """The name of the GPU this worker runs kernels on ("NVIDIA H200"); "" when it runs none."""
    if run_unavailable_reason() is not None:
        return ""
    from graders.gpu import gpu_info

    return gpu_info().name


def worker_arch() -> str:
    """The arch to compile for: this worker's GPU, else the configured default."""
    if run_unavailable_reason() is None:
        from graders.gpu import detect_arch

        arch = detect_arch()
        if arch:
            return arch
    return get_settings().default_arch


@functools.cache
def worker_gpu() -> tuple[str, str]:
    """(model name, driver version) of this worker's GPU, read without a CUDA context."""
    from graders.gpu import gpu_info

    info = gpu_info()
    return info.name, info.driver
