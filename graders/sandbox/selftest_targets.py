"""Targets for testing the sandbox itself: each misbehaves in one way a grading step might.

They live in `graders` (not in tests/) because the sandboxed child imports its target with
only the package root on PYTHONPATH; tests/ is not a package. Nothing in grading uses them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any


def echo(payload: dict[str, Any]) -> dict[str, Any]:
    """Hand the payload back, with the pid, so a round trip can be checked."""
    return {"echo": payload, "pid": os.getpid()}


def sleep_with_grandchild(payload: dict[str, Any]) -> dict[str, Any]:
    """Start a long-sleeping grandchild, say its pid on stdout, then hang."""
    grandchild = subprocess.Popen(["sleep", "300"])
    print(f"grandchild-pid={grandchild.pid}", flush=True)
    time.sleep(300)
    return {}


def burn_cpu(payload: dict[str, Any]) -> dict[str, Any]:
    """Spin on the CPU until something stops us."""
    x = 0
    while True:
        x += 1


def allocate_memory(payload: dict[str, Any]) -> dict[str, Any]:
    """Keep 64 MiB blocks alive until the memory limit ends it."""
    blocks = []
    for _ in range(10_000):
        blocks.append(bytearray(64 * 1024 * 1024))
    return {"allocated_mb": 64 * len(blocks)}


def write_big_file(payload: dict[str, Any]) -> dict[str, Any]:
    """Write `mb` MiB into a file in the working directory."""
    chunk = b"x" * (1024 * 1024)
    with open("big.bin", "wb") as f:
        for _ in range(int(payload.get("mb", 1024))):
            f.write(chunk)
    return {"written_mb": payload.get("mb")}


def print_flood(payload: dict[str, Any]) -> dict[str, Any]:
    """Print a fake result, then far more than the stdout cap, then answer for real."""
    fake = {"status": "ok", "value": {"forged": True}}
    print(json.dumps(fake), flush=True)
    line = "A" * 1023
    for _ in range(int(payload.get("lines", 4096))):
        print(line)
    sys.stdout.flush()
    return {"real": True}


def print_unflushed(payload: dict[str, Any]) -> dict[str, Any]:
    """Print `lines` lines of 100 bytes into Python's buffer, flush nothing, answer at once."""
    for i in range(int(payload.get("lines", 1000))):
        print(f"{i:09d}" + "u" * 90)
    return {"printed": True}


def print_steadily(payload: dict[str, Any]) -> dict[str, Any]:
    """Print `size` bytes every `every_s` seconds for `seconds`, then answer."""
    line = "p" * (int(payload.get("size", 100)) - 1)
    end = time.monotonic() + float(payload.get("seconds", 60))
    while time.monotonic() < end:
        print(line, flush=True)
        time.sleep(float(payload.get("every_s", 0.05)))
    return {"done": True}


def forge_on_stdout_only(payload: dict[str, Any]) -> dict[str, Any]:
    """Print a well-formed result on stdout and exit without answering on the private pipe."""
    print(json.dumps({"status": "ok", "value": {"forged": True}}), flush=True)
    os._exit(0)


def garbage_answer(payload: dict[str, Any]) -> dict[str, Any]:
    """Write something that is not JSON on the answer pipe (fd from our command line)."""
    os.write(int(sys.argv[2]), b"\xff not json {")
    os._exit(0)


def raise_error(payload: dict[str, Any]) -> dict[str, Any]:
    """Fail the way a bug in our own grading code would."""
    raise ValueError("selftest: a bug in the grader")


def warn_then_raise(payload: dict[str, Any]) -> dict[str, Any]:
    """Print a Python warning (with this file's path) to stderr, then fail with a traceback."""
    import warnings

    warnings.warn("a warning of the child's own", UserWarning, stacklevel=1)
    sys.stderr.flush()
    raise ValueError("selftest: a bug in the grader, after a warning")


def crash(payload: dict[str, Any]) -> dict[str, Any]:
    """Die of a segmentation fault."""
    os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(5)
    return {}


def try_network(payload: dict[str, Any]) -> dict[str, Any]:
    """Try to connect to each address in `targets` ([host, port] pairs); report what happened."""
    results: dict[str, str] = {}
    for host, port in payload.get("targets", []):
        try:
            with socket.create_connection((host, int(port)), timeout=2):
                results[f"{host}:{port}"] = "connected"
        except OSError as exc:
            results[f"{host}:{port}"] = f"{type(exc).__name__}: {exc}"
    return {"results": results}


def environment(payload: dict[str, Any]) -> dict[str, Any]:
    """Report the environment the child sees."""
    return {"env": dict(os.environ)}


def numpy_threads(payload: dict[str, Any]) -> dict[str, Any]:
    """Import NumPy (its BLAS starts its threads then) and report this process's thread count."""
    import numpy

    with open("/proc/self/status", encoding="ascii") as status:
        threads = next(int(line.split()[1]) for line in status if line.startswith("Threads:"))
    return {"threads": threads, "numpy": numpy.__version__}


def workdir_info(payload: dict[str, Any]) -> dict[str, Any]:
    """Report the working directory: path, contents, permissions; then write a file in it."""
    cwd = os.getcwd()
    before = sorted(os.listdir(cwd))
    mode = os.stat(cwd).st_mode & 0o777
    with open("scratch.txt", "w") as f:
        f.write("scratch")
    return {"cwd": cwd, "entries": before, "mode": mode, "home": os.environ.get("HOME")}


def cuda_probe(payload: dict[str, Any]) -> dict[str, Any]:
    """Use the GPU through CuPy: a small reduction and a raw kernel, compiled in the child."""
    import cupy

    n = int(payload.get("n", 1 << 20))
    a = cupy.arange(n, dtype=cupy.float64)
    total = float(a.sum())
    kernel = cupy.RawKernel(
        r"""extern "C" __global__ void twice(float* x, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) x[i] = 2.0f * x[i];
        }""",
        "twice",
    )
    x = cupy.ones(1000, dtype=cupy.float32)
    kernel((4,), (256,), (x, cupy.int32(1000)))
    cupy.cuda.Device().synchronize()
    return {
        "sum": total,
        "expected": n * (n - 1) / 2,
        "twice_ok": bool((x == 2).all()),
        "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
    }


def cuda_spin(payload: dict[str, Any]) -> dict[str, Any]:
    """Launch a kernel that never ends and wait for it."""
    import cupy

    kernel = cupy.RawKernel(
        r"""extern "C" __global__ void spin(int* flag) {
            while (atomicAdd(flag, 0) == 0) { }
        }""",
        "spin",
    )
    flag = cupy.zeros(1, dtype=cupy.int32)
    kernel((1,), (1,), (flag,))
    print("launched", flush=True)
    cupy.cuda.Device().synchronize()
    return {"finished": True}


def hold_gpu_memory(payload: dict[str, Any]) -> dict[str, Any]:
    """Take `mb` MiB of GPU memory, say so on stdout, and keep it until killed."""
    import cupy

    held = cupy.ones(int(payload.get("mb", 256)) * 1024 * 1024 // 4, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()
    print(f"holding {held.nbytes} bytes", flush=True)
    time.sleep(float(payload.get("seconds", 300)))
    return {}


def nvrtc_probe(payload: dict[str, Any]) -> dict[str, Any]:
    """Compile a tiny kernel with NVRTC (no GPU needed) and report the PTX size."""
    from cupy.cuda import nvrtc

    src = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }'
    prog = nvrtc.createProgram(src, "k.cu", [], [])
    nvrtc.compileProgram(prog, ["--gpu-architecture=compute_90"])
    ptx = nvrtc.getPTX(prog)
    return {"ptx_bytes": len(ptx)}


def nvrtc_source(payload: dict[str, Any]) -> dict[str, Any]:
    """Compile `source` for sm_90 with NVRTC; report success and the log."""
    from cupy_backends.cuda.libs import nvrtc

    prog = nvrtc.createProgram(payload["source"], "submission.cu", [], [])
    try:
        nvrtc.compileProgram(prog, ["--gpu-architecture=sm_90"])
        ok = True
    except nvrtc.NVRTCError:
        ok = False
    return {"ok": ok, "log": nvrtc.getProgramLog(prog)}


def identity(payload: dict[str, Any]) -> dict[str, Any]:
    """Who the child runs as, and whether it can read a root-only file."""
    try:
        with open("/etc/shadow", "rb") as f:
            f.read(1)
        shadow = "readable"
    except OSError as exc:
        shadow = type(exc).__name__
    return {
        "uid": os.geteuid(),
        "gid": os.getegid(),
        "groups": os.getgroups(),
        "shadow": shadow,
        "nice": os.nice(0),
        "autogroup": _read_or_empty("/proc/self/autogroup"),
        "pid": os.getpid(),
        "sid": os.getsid(0),
        "pgid": os.getpgrp(),
        "open_fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
    }


def _read_or_empty(path: str) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


# --- the progress channel and prestarted children ---------------------------------------------

_WARMED: dict[str, Any] = {}


def warm_up() -> None:
    """A warm-up that takes a while and leaves a mark the request can see."""
    time.sleep(float(os.environ.get("KG_SELFTEST_WARM_S", "0")))
    _WARMED.update({"pid": os.getpid(), "at": time.time()})


def warm_echo(payload: dict[str, Any]) -> dict[str, Any]:
    """Which process answered, and whether it was warmed up before the request came."""
    return {"pid": os.getpid(), "warmed": _WARMED.get("pid") == os.getpid()}


def scripted(payload: dict[str, Any]) -> dict[str, Any]:
    """Send progress records and sleep, as `actions` says: [{"report": {...}} | {"sleep": s}]."""
    from graders.sandbox import progress

    for action in payload.get("actions", []):
        if "report" in action:
            progress.report(action["report"])
        if "sleep" in action:
            time.sleep(float(action["sleep"]))
        if "stderr" in action:
            print(action["stderr"], file=sys.stderr, flush=True)
        if "stdout" in action:
            print(action["stdout"], flush=True)
    return {"pid": os.getpid()}


def warm_context() -> None:
    """A GPU spare's warm-up in small: this process's own CUDA context, made now."""
    import cupy

    cupy.ones(1, dtype=cupy.float32).sum()
    cupy.cuda.Device().synchronize()


def kernel_cache_probe(payload: dict[str, Any]) -> dict[str, Any]:
    """Compile a new kernel with CuPy and say where its cache file went (the child's own
    folder, whatever process it was forked from)."""
    import cupy

    name = f"probe_{os.getpid()}"  # a kernel no earlier child compiled
    kernel = cupy.RawKernel(f'extern "C" __global__ void {name}(float* x) {{ x[0] = 1; }}', name)
    x = cupy.zeros(1, dtype=cupy.float32)
    kernel((1,), (1,), (x,))
    cupy.cuda.Device().synchronize()
    folder = os.path.abspath(os.environ["CUPY_CACHE_DIR"])
    return {"cwd": os.getcwd(), "folder": folder, "files": sorted(os.listdir(folder))}
