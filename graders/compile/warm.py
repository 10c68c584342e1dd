"""Warm-up for a compile child started ahead of need: NVRTC loaded and run once.

Called in a prestarted sandboxed child (graders.sandbox.prestart) before any submission
arrives, so the child that compiles a submission finds the library loaded.
"""

from __future__ import annotations


def load_nvrtc() -> None:
    """Load NVRTC and compile once, and import the module that compiles a submission
    (graders.compile.pipeline: 47 ms of imports, about half of a compile stage's wall time,
    while the request brought them)."""
    from cupy_backends.cuda.libs import nvrtc

    import graders.compile.pipeline  # noqa: F401  (compiler.COMPILE_TARGET's module)

    prog = nvrtc.createProgram('extern "C" __global__ void k() {}', "warm.cu", [], [])
    try:
        nvrtc.compileProgram(prog, ["--gpu-architecture=compute_75"])
    finally:
        nvrtc.destroyProgram(prog)
