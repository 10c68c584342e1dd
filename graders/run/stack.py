"""A kernel's per-thread local memory (its stack frame: large local arrays, spills, recursion)
is reserved by the driver for every thread the GPU can hold at once, not for the threads a
launch has: a 128 KiB array per thread reserved about 33 GiB on an H200 (132 SMs of 2048
threads) and passed a lab, crowding every grading beside it. A kernel whose frame would reserve
more than the lab's limit on it (`limits.local_memory_mb`, 8 GiB by default: about 31 KiB a
thread on an H200, so a 4 KiB scratch array stays legal) is refused before its first launch,
with the sizes in words.

The frame comes from the driver (CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES of the loaded function), the
resident threads from the device's properties: the run child asks both, on the worker's own
GPU, between loading the module and launching anything (the reservation is made at launch).
"""

from __future__ import annotations

from typing import Any

from graders.run.harness import kernel_attributes

MIB = 1 << 20


def _size(n: int) -> str:
    if n >= 1 << 30:
        return f"{n / (1 << 30):.1f} GiB"
    if n >= MIB:
        return f"{n / MIB:.1f} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.0f} KiB"
    return f"{n} bytes"


def resident_threads(props: dict[str, Any]) -> int:
    """Threads the GPU holds at once: multiprocessors times threads per multiprocessor."""
    return int(props.get("multiProcessorCount", 0)) * int(
        props.get("maxThreadsPerMultiProcessor", 0)
    )


def refusal(
    frames: dict[str, int], *, resident: int, limit_bytes: int, several: bool = False
) -> str:
    """The sentence that refuses the kernel whose frame times `resident` threads passes
    `limit_bytes` (the largest such frame); "" when every kernel fits."""
    if not frames or resident <= 0:
        return ""
    kernel, frame = max(frames.items(), key=lambda item: item[1])
    reserved = frame * resident
    if reserved <= limit_bytes:
        return ""
    which = f" `{kernel}`" if several else ""
    return (
        f"The kernel{which} keeps {_size(frame)} of local memory per thread (large arrays "
        f"declared inside it, or deep recursion), and the GPU reserves that for every thread "
        f"it can hold at once ({resident:,} on this GPU): {_size(reserved)}, more than this "
        f"lab's limit of {_size(limit_bytes)} of GPU memory for it. Keep arrays inside the kernel "
        "small: put large data in global memory (the kernel's parameters) or in shared memory."
    )


def frames_of(funcs: dict[str, Any]) -> dict[str, int]:
    """Each loaded kernel's local memory per thread, in bytes (the driver's figure)."""
    return {name: kernel_attributes(func).get("local_bytes", 0) for name, func in funcs.items()}
