"""Loading and launching a kernel, waiting for it with a limit, and naming what went wrong.

The arrays a launch gets are in `graders.run.buffers`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from graders.run.inputs import DTYPES
from graders.spec import LabSpec
from graders.timing.repetitions import KernelHung, wait_event

if TYPE_CHECKING:
    from graders.run.buffers import DeviceArrays

# CUDA errors after which the context is unusable: nothing more can run in this process.
STICKY_ERRORS = {
    "CUDA_ERROR_ILLEGAL_ADDRESS": (
        "The kernel accessed memory it does not own (an illegal address): an index past the "
        "end of an array, or a bad pointer. Check every index against the array's size."
    ),
    "CUDA_ERROR_LAUNCH_FAILED": (
        "The kernel crashed (unspecified launch failure); an access far outside an array or a "
        "__trap() can cause this."
    ),
    "CUDA_ERROR_ILLEGAL_INSTRUCTION": (
        "The kernel stopped on an illegal instruction; a __trap() or a corrupted stack ends a "
        "kernel this way."
    ),
    "CUDA_ERROR_ASSERT": "An assert() in the kernel failed.",
    "CUDA_ERROR_MISALIGNED_ADDRESS": (
        "The kernel read or wrote through a misaligned address (a pointer cast to a wider type "
        "than its data is aligned for)."
    ),
    "CUDA_ERROR_HARDWARE_STACK_ERROR": (
        "The kernel overflowed its stack (deep recursion or large local arrays)."
    ),
    "CUDA_ERROR_INVALID_PC": "The kernel jumped to an invalid instruction address.",
    "CUDA_ERROR_LAUNCH_TIMEOUT": "The kernel ran past the display watchdog's limit.",
    "CUDA_ERROR_UNKNOWN": "The kernel failed with an unknown CUDA error.",
}
LAUNCH_ERRORS = {
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": (
        "The launch was refused: too many resources requested for launch. The kernel uses too "
        "many registers for a block of {threads} threads; use fewer registers per thread "
        "(simpler code, or __launch_bounds__({threads})) or declare a smaller tile."
    ),
    "CUDA_ERROR_INVALID_VALUE": (
        "The launch was refused (invalid argument): the block of {threads} threads or the "
        "{shared} bytes of shared memory per block are more than this GPU allows."
    ),
}

CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0
CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3
CU_FUNC_ATTRIBUTE_NUM_REGS = 4


@dataclass
class KernelFailure(Exception):
    """A launch or a kernel failed; `verdict` is a CaseResult verdict."""

    verdict: str  # "kernel_error", "launch_error", "timeout"
    message: str
    sticky: bool = False  # the CUDA context is dead; nothing more can run here

    def __str__(self) -> str:
        return self.message


# The runtime API (event queries, copies) names the same errors differently.
RUNTIME_NAMES = {
    "cudaErrorIllegalAddress": "CUDA_ERROR_ILLEGAL_ADDRESS",
    "cudaErrorLaunchFailure": "CUDA_ERROR_LAUNCH_FAILED",
    "cudaErrorIllegalInstruction": "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "cudaErrorAssert": "CUDA_ERROR_ASSERT",
    "cudaErrorMisalignedAddress": "CUDA_ERROR_MISALIGNED_ADDRESS",
    "cudaErrorHardwareStackError": "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "cudaErrorInvalidPc": "CUDA_ERROR_INVALID_PC",
    "cudaErrorLaunchTimeout": "CUDA_ERROR_LAUNCH_TIMEOUT",
    "cudaErrorUnknown": "CUDA_ERROR_UNKNOWN",
    "cudaErrorLaunchOutOfResources": "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
    "cudaErrorInvalidValue": "CUDA_ERROR_INVALID_VALUE",
    "cudaErrorInvalidConfiguration": "CUDA_ERROR_INVALID_VALUE",
    "cudaErrorMemoryAllocation": "CUDA_ERROR_OUT_OF_MEMORY",
}


def cuda_error_name(exc: BaseException) -> str:
    text = str(exc)
    for name in (*STICKY_ERRORS, *LAUNCH_ERRORS, "CUDA_ERROR_OUT_OF_MEMORY"):
        if name in text:
            return name
    for runtime, name in RUNTIME_NAMES.items():
        if runtime in text:
            return name
    return text.split(":")[0].strip()


def classify_cuda_error(exc: BaseException, *, threads: int = 0, shared: int = 0) -> KernelFailure:
    name = cuda_error_name(exc)
    if name in STICKY_ERRORS:
        return KernelFailure("kernel_error", STICKY_ERRORS[name], sticky=True)
    if name in LAUNCH_ERRORS:
        return KernelFailure(
            "launch_error", LAUNCH_ERRORS[name].format(threads=threads, shared=shared)
        )
    if name == "CUDA_ERROR_OUT_OF_MEMORY":
        return KernelFailure("kernel_error", "The GPU ran out of memory for this case.")
    # Unknown errors are treated as fatal to the context: safer to start a fresh process.
    return KernelFailure("kernel_error", f"The kernel failed: {exc}.", sticky=True)


_MODULES: list[Any] = []  # loaded modules stay alive as long as the process: a child grades one


def load_kernels(cubin: bytes, kernels: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """Every kernel the lab names, from one module: name -> function."""
    from cupy.cuda import function

    module = function.Module()
    module.load(cubin)
    _MODULES.append(module)  # a Function does not keep its module alive by itself
    return {name: module.get_function(name) for name in kernels}


def kernel_attributes(func: Any) -> dict[str, int]:
    from cupy.cuda import driver

    out = {}
    for key, attr in (
        ("max_threads", CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
        ("static_shared", CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
        ("local_bytes", CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
        ("registers", CU_FUNC_ATTRIBUTE_NUM_REGS),
    ):
        try:
            out[key] = int(driver.funcGetAttribute(attr, func.ptr))
        except Exception:
            out[key] = 0
    return out


@dataclass
class LaunchStep:
    """One launch of a case: which kernel, its geometry and its arguments."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    args: list[Any]

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


@dataclass
class LaunchPlan:
    """One case's launches, resolved, in order."""

    steps: list[LaunchStep]

    @classmethod
    def build(
        cls, lab: LabSpec, names: dict[str, Any], arrays: DeviceArrays, scalars: dict[str, Any]
    ) -> LaunchPlan:
        return cls.build_with(lab, names, lambda name: arrays.arrays[name].view, scalars)

    @classmethod
    def build_with(
        cls,
        lab: LabSpec,
        names: dict[str, Any],
        array_arg: Callable[[str], Any],
        scalars: dict[str, Any],
    ) -> LaunchPlan:
        """The plan with `array_arg(name)` for each array argument (a device array; for the
        sanitizer's launcher, graders.sanitizer.job, the index of its buffer)."""
        steps = []
        for i, launch in enumerate(lab.launches):
            grid, block, shared = launch.geometry(names)
            args: list[Any] = []
            for bound in lab.launch_args(i, names):
                if bound.param is not None and bound.param.is_array:
                    args.append(array_arg(bound.param.name))
                elif bound.param is not None:
                    args.append(scalars[bound.param.name])
                else:
                    args.append(np.dtype(DTYPES[bound.dtype]).type(bound.value))
            steps.append(LaunchStep(launch.kernel or lab.kernel, grid, block, shared, args))
        return cls(steps)


Functions = dict[str, Any]  # kernel name -> loaded function (load_kernels)


def check_launchable(funcs: Functions, plan: LaunchPlan, *, max_shared: int) -> None:
    """Refuse, with a plain reason, a launch the driver would refuse with a cryptic one."""
    attrs = {name: kernel_attributes(func) for name, func in funcs.items()}
    several = len(funcs) > 1
    for step in plan.steps:
        a = attrs[step.kernel]
        which = f" `{step.kernel}`" if several else ""
        threads = step.threads
        if a["max_threads"] and threads > a["max_threads"]:
            raise KernelFailure(
                "launch_error",
                f"Too many resources requested for launch: the kernel{which} uses "
                f"{a['registers']} registers per thread, so a block can have at most "
                f"{a['max_threads']} threads, but the lab launches {threads}. Use fewer "
                f"registers (__launch_bounds__({threads})) or declare a smaller tile.",
            )
        total = a["static_shared"] + step.shared
        if max_shared and total > max_shared:
            raise KernelFailure(
                "launch_error",
                f"Too much shared memory: a block of the kernel{which} needs {total} bytes "
                f"({a['static_shared']} declared in the kernel, {step.shared} dynamic), and "
                f"this GPU allows {max_shared} per block. Use a smaller tile.",
            )
        if min(step.grid) < 1:
            raise KernelFailure(
                "launch_error", f"The lab's grid {step.grid} is empty for this case."
            )


def launch_all(funcs: Functions, plan: LaunchPlan) -> None:
    """Queue every launch of the case on the current stream, each with its kernel (no waiting)."""
    for step in plan.steps:
        try:
            funcs[step.kernel](step.grid, step.block, tuple(step.args), shared_mem=step.shared)
        except Exception as exc:
            raise classify_cuda_error(exc, threads=step.threads, shared=step.shared) from exc


HANG_CAUSES = (
    "(an endless loop, or a __syncthreads() in divergent code that some threads never reach, "
    "can cause this)."
)
PRINTING_CAUSE = (
    "It printed as it ran, and a printf in every thread is slow even where the GPU drops what "
    "does not fit its buffer: print from a few threads only (an endless loop, or a "
    "__syncthreads() in divergent code, also does this)."
)


def hang_message(timeout_s: float, *, printed: bool = False) -> str:
    head = f"Killed after {timeout_s:g} s: the kernel did not finish"
    return f"{head}. {PRINTING_CAUSE}" if printed else f"{head} {HANG_CAUSES}"


def as_printing_hang(message: str) -> str:
    """A hang's sentence told that the kernel printed as it ran (the child cannot see its own
    output; the parent that read it can)."""
    if not message.endswith(" " + HANG_CAUSES):
        return message
    return f"{message[: -len(HANG_CAUSES) - 1]}. {PRINTING_CAUSE}"


def hang_failure(timeout_s: float) -> KernelFailure:
    return KernelFailure("timeout", hang_message(timeout_s), sticky=True)


# Exceptions that only a bug in the grader's Python raises; a kernel's doing surfaces as a CUDA
# error (or is caught where it happens and becomes the case's verdict). The run child lets these
# through, and the run stage reads them as the grader's failure (graders.run.stage).
GRADER_BUGS = frozenset(
    {
        "AssertionError", "AttributeError", "ImportError", "IndexError", "KeyError",
        "ModuleNotFoundError", "NameError", "NotImplementedError", "TypeError",
        "UnboundLocalError", "ZeroDivisionError",
    }
)  # fmt: skip


def as_failure(exc: BaseException, timeout_s: float) -> KernelFailure:
    """Any exception from running a kernel, as a KernelFailure with a plain message."""
    if isinstance(exc, KernelFailure):
        return exc
    if isinstance(exc, KernelHung):
        return hang_failure(timeout_s)
    return classify_cuda_error(exc)


def run_and_wait(funcs: Functions, plan: LaunchPlan, timeout_s: float) -> float:
    """Launch and wait at most `timeout_s`; returns wall seconds; raises KernelFailure."""
    import cupy as cp

    began = time.monotonic()
    launch_all(funcs, plan)
    done = cp.cuda.Event()
    try:
        done.record()
        wait_event(done, began + timeout_s)
        done.synchronize()  # surfaces a kernel's error
    except KernelHung as exc:
        raise hang_failure(timeout_s) from exc
    except Exception as exc:
        raise classify_cuda_error(exc) from exc
    return time.monotonic() - began
