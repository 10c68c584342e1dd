"""Device buffers with guard bands, sentinel-filled outputs, launches, and what went wrong.

Every array the kernel gets lives inside a larger allocation: guard bands of a known byte
before and after it. Outputs are refilled with a sentinel before every launch. After the run
the guards must be intact (else: an out-of-bounds write) and the inputs unchanged.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graders.run import compare
from graders.run.inputs import DTYPES
from graders.spec import LabSpec
from graders.timing.repetitions import KernelHung, wait_event

# Big enough that a kernel writing a row (or a tile) past its output lands in the guard
# rather than in a neighbouring buffer.
GUARD_BYTES = 64 * 1024

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


@dataclass
class DeviceArray:
    name: str
    kind: str
    dtype: np.dtype
    shape: tuple[int, ...]
    raw: Any  # cupy uint8 array: guard, data, guard
    view: Any  # cupy array of dtype and shape over the data
    guard: int
    pristine: Any = None  # device copy of the initial data (in / inout)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def _sentinel_bits(dtype: np.dtype) -> tuple[np.dtype, Any]:
    """The sentinel as an unsigned integer of the same width, for a fast device fill."""
    if dtype in compare.SENTINEL_BITS:
        bits = compare.SENTINEL_BITS[dtype]
        return bits.dtype, bits
    value = compare.SENTINEL_INTS[dtype]
    unsigned = np.dtype(f"u{dtype.itemsize}")
    return unsigned, np.array(value, dtype=dtype).view(unsigned)[()]


@dataclass
class DeviceArrays:
    """All of one case's arrays on the device."""

    arrays: dict[str, DeviceArray] = field(default_factory=dict)

    @classmethod
    def allocate(
        cls,
        lab: LabSpec,
        names: dict[str, Any],
        host: dict[str, np.ndarray],
        *,
        guard: int = GUARD_BYTES,
    ) -> DeviceArrays:
        import cupy as cp

        out = cls()
        for param in lab.params:
            if not param.is_array:
                continue
            dtype = np.dtype(DTYPES[param.dtype])
            shape = param.shape_for(names)
            nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            raw = cp.empty(guard + nbytes + guard, dtype=cp.uint8)
            view = cp.ndarray(shape, dtype=dtype, memptr=raw.data + guard)
            arr = DeviceArray(param.name, param.kind, dtype, shape, raw, view, guard)
            if guard:
                raw[:guard].fill(compare.GUARD_BYTE)
                raw[guard + nbytes :].fill(compare.GUARD_BYTE)
            if param.name in host:
                view.set(np.ascontiguousarray(host[param.name]))
                arr.pristine = view.copy()
            out.arrays[param.name] = arr
        out.prepare()
        return out

    def prepare(self) -> None:
        """Before a launch: outputs and scratch get the sentinel, in-out arrays their data."""
        for arr in self.arrays.values():
            if arr.pristine is not None and arr.kind != "in":
                arr.view[...] = arr.pristine
            elif arr.kind in ("out", "scratch"):
                unsigned, bits = _sentinel_bits(arr.dtype)
                arr.view.view(unsigned).fill(bits)

    def guard_violations(self) -> list[str]:
        """Sentences naming each array whose guard bands were written."""
        import cupy as cp

        found = []
        for arr in self.arrays.values():
            if not arr.guard:
                continue
            before = arr.raw[: arr.guard] != compare.GUARD_BYTE
            after = arr.raw[arr.guard + arr.nbytes :] != compare.GUARD_BYTE
            if bool(after.any()):
                first = int(cp.flatnonzero(after)[0])
                elem = arr.view.size + first // arr.dtype.itemsize
                found.append(
                    f"The kernel wrote past the end of {arr.name}: {arr.name} has "
                    f"{arr.view.size} elements, and element {elem} (byte {first} after its end) "
                    "was written. Check the bounds before every store."
                )
            elif bool(before.any()):
                last = int(cp.flatnonzero(before)[-1])
                back = (arr.guard - last + arr.dtype.itemsize - 1) // arr.dtype.itemsize
                found.append(
                    f"The kernel wrote before the start of {arr.name} (about {back} elements "
                    "before index 0): a negative index."
                )
        return found

    def modified_inputs(self) -> list[str]:
        changed = []
        for arr in self.arrays.values():
            if arr.kind == "in" and arr.pristine is not None:
                unsigned = np.dtype(f"u{arr.dtype.itemsize}")
                if bool((arr.view.view(unsigned) != arr.pristine.view(unsigned)).any()):
                    changed.append(arr.name)
        return changed

    def host(self, name: str) -> np.ndarray:
        return self.arrays[name].view.get()

    def release(self) -> None:
        self.arrays.clear()


_MODULES: list[Any] = []  # loaded modules stay alive as long as the process: a child grades one


def load_kernel(cubin: bytes, kernel: str) -> Any:
    from cupy.cuda import function

    module = function.Module()
    module.load(cubin)
    _MODULES.append(module)  # a Function does not keep its module alive by itself
    return module.get_function(kernel)


def kernel_attributes(func: Any) -> dict[str, int]:
    from cupy.cuda import driver

    out = {}
    for key, attr in (
        ("max_threads", CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
        ("static_shared", CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
        ("registers", CU_FUNC_ATTRIBUTE_NUM_REGS),
    ):
        try:
            out[key] = int(driver.funcGetAttribute(attr, func.ptr))
        except Exception:
            out[key] = 0
    return out


@dataclass
class LaunchPlan:
    """One case's launches, resolved: geometry and the argument list of each."""

    steps: list[tuple[tuple[int, int, int], tuple[int, int, int], int, list[Any]]]

    @classmethod
    def build(
        cls, lab: LabSpec, names: dict[str, Any], arrays: DeviceArrays, scalars: dict[str, Any]
    ) -> LaunchPlan:
        steps = []
        for i, launch in enumerate(lab.launches):
            grid, block, shared = launch.geometry(names)
            args: list[Any] = []
            for bound in lab.launch_args(i, names):
                if bound.param is not None and bound.param.is_array:
                    args.append(arrays.arrays[bound.param.name].view)
                elif bound.param is not None:
                    args.append(scalars[bound.param.name])
                else:
                    args.append(np.dtype(DTYPES[bound.dtype]).type(bound.value))
            steps.append((grid, block, shared, args))
        return cls(steps)


def check_launchable(func: Any, plan: LaunchPlan, *, max_shared: int) -> None:
    """Refuse, with a plain reason, a launch the driver would refuse with a cryptic one."""
    attrs = kernel_attributes(func)
    for grid, block, shared, _ in plan.steps:
        threads = block[0] * block[1] * block[2]
        if attrs["max_threads"] and threads > attrs["max_threads"]:
            raise KernelFailure(
                "launch_error",
                f"Too many resources requested for launch: the kernel uses "
                f"{attrs['registers']} registers per thread, so a block can have at most "
                f"{attrs['max_threads']} threads, but the lab launches {threads}. Use fewer "
                f"registers (__launch_bounds__({threads})) or declare a smaller tile.",
            )
        total = attrs["static_shared"] + shared
        if max_shared and total > max_shared:
            raise KernelFailure(
                "launch_error",
                f"Too much shared memory: a block needs {total} bytes "
                f"({attrs['static_shared']} declared in the kernel, {shared} dynamic), and this "
                f"GPU allows {max_shared} per block. Use a smaller tile.",
            )
        if min(grid) < 1:
            raise KernelFailure("launch_error", f"The lab's grid {grid} is empty for this case.")


def launch_all(func: Any, plan: LaunchPlan) -> None:
    """Queue every launch of the case on the current stream (no waiting)."""
    for grid, block, shared, args in plan.steps:
        try:
            func(grid, block, tuple(args), shared_mem=shared)
        except Exception as exc:
            threads = block[0] * block[1] * block[2]
            raise classify_cuda_error(exc, threads=threads, shared=shared) from exc


def hang_failure(timeout_s: float) -> KernelFailure:
    return KernelFailure(
        "timeout",
        f"Killed after {timeout_s:g} s: the kernel did not finish (an endless loop, or a "
        "__syncthreads() in divergent code that some threads never reach, can cause this).",
        sticky=True,
    )


def as_failure(exc: BaseException, timeout_s: float) -> KernelFailure:
    """Any exception from running a kernel, as a KernelFailure with a plain message."""
    if isinstance(exc, KernelFailure):
        return exc
    if isinstance(exc, KernelHung):
        return hang_failure(timeout_s)
    return classify_cuda_error(exc)


def run_and_wait(func: Any, plan: LaunchPlan, timeout_s: float) -> float:
    """Launch and wait at most `timeout_s`; returns wall seconds; raises KernelFailure."""
    import cupy as cp

    began = time.monotonic()
    launch_all(func, plan)
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
