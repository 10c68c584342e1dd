"""Warm-up for a compile child started ahead of need: NVRTC loaded and run once.

Called in a prestarted sandboxed child (graders.sandbox.prestart) before any submission
arrives, so the child that compiles a submission finds the library loaded.
"""

from __future__ import annotations


def load_nvrtc() -> None:
    """Load NVRTC (without importing CuPy, which a compile child cannot afford) and compile once."""
    from cupy_backends.cuda.libs import nvrtc

    prog = nvrtc.createProgram('extern "C" __global__ void k() {}', "warm.cu", [], [])
    try:
        nvrtc.compileProgram(prog, ["--gpu-architecture=compute_75"])
    finally:
        nvrtc.destroyProgram(prog)
