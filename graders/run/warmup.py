"""The grader's own GPU kernels, each run once: CuPy compiles (or loads) them here.

CuPy compiles an elementwise or reduction kernel the first time it meets a dtype combination;
with an empty cache that took seconds per grading. `steps()` walks every path the run stage
takes for every array dtype a lab may have (generating with each distribution, filling,
checking guards, comparing, the never-written count, the properties, each oracle), and
`run_locked` runs them, so that after it the kernels are in CuPy's disk cache (a trusted
build, see graders.run.kernel_cache) or loaded in this process (a prestarted child's warm-up).

A reduction's kernel also depends on the size it reduces: CuPy's CUB reductions use a block of
32 to 512 threads, a quarter of the size rounded up to a power of two (measured on an H100: 6
such kernels compiled per grading, 15 s of a 17 s run stage, before `REDUCTION_SIZES` was
added), so the comparisons run once at a size for each block.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from graders.run import compare, oracles, properties, quick
from graders.run.generate import device_fill
from graders.run.host_dtypes import host_dtype
from graders.spec import LabSpec
from graders.spec.dtypes import ARRAY_DTYPES
from graders.timing.lock import GpuLock

# The array types a prestarted child warms before it knows its lab: most labs' only one. A
# lab's others are warmed when its grading starts (graders.run.child); any kernel not warmed
# loads from the kernel cache on its first use (milliseconds; never compiled in a child).
AHEAD = ("float32",)

# A size for each CUB block size (32, 64, 128, 256, 512 threads of 4 items each), and two
# small ones for CuPy's own reduction kernel where CUB is not used.
REDUCTION_SIZES = (1, 40, 100, 200, 400, 800, 5000)

_DISTS: list[dict[str, Any]] = [
    {"dist": "uniform", "low": -1.0, "high": 1.0},
    {"dist": "integers", "low": -3, "high": 3},
    {"dist": "normal", "mean": 0.0, "std": 2.0},
    {"dist": "constant", "value": 0},
    {"dist": "zeros"},
]


def _arrays(cp: Any, name: str) -> Any:
    dtype = host_dtype(name)
    data = cp.empty((8, 8), dtype=dtype)
    for init in _DISTS:
        if init["dist"] == "uniform" and dtype.kind in "iu" and name != "bfloat16":
            continue  # uniform into an integer dtype draws integers
        device_fill(data, init, {}, 7, dtype=name)
    unsigned = np.dtype(f"u{dtype.itemsize}")
    raw = cp.empty(4 * dtype.itemsize * 8, dtype=cp.uint8)
    raw.view(unsigned).fill(compare.guard_value(dtype))
    bool((raw.view(unsigned) != compare.guard_value(dtype)).any())
    cp.flatnonzero(raw == 0)
    other = data.copy()
    bool((data.view(unsigned) != other.view(unsigned)).any())
    return data


def _checks(cp: Any, data: Any) -> None:
    """What judging an output runs besides the comparison: the never-written count and the
    properties (graders.run.judge)."""
    mask = compare.sentinel_mask(data).reshape(-1)
    int(cp.count_nonzero(mask))
    int(cp.argmax(mask.view(cp.uint8)))
    floats = compare.is_float_data(data.dtype)
    wide = compare.widen(data)
    if floats:
        properties.rows_sum_to_one(wide.reshape(-1, data.shape[-1]), name="w", atol=0, rtol=0)
    got = wide if floats else data
    properties.sorted_permutation(got, got, name="w", of="w")
    wide.fill(0)


def _reduction(cp: Any, name: str, size: int, floats: bool) -> None:
    """The comparisons, guard checks and properties at one reduction block size."""
    dtype = host_dtype(name)
    unsigned = np.dtype(f"u{dtype.itemsize}")
    data = cp.empty(size, dtype=dtype)
    device_fill(data, _DISTS[0 if floats else 1], {}, size, dtype=name)
    wide = compare.widen(data)
    compare.compare_elementwise(data, wide, atol=1e-5, rtol=1e-5)
    compare.compare_sum(data, 1.0, atol=1e-6, rtol=1e-6)
    bool((data.view(unsigned) != compare.guard_value(dtype)).any())
    _checks(cp, data.reshape(1, size))
    if size > 1:
        _checks(cp, data[: size // 2 * 2].reshape(size // 2, 2))
    wide.fill(0)


def _comparisons(cp: Any, name: str) -> None:
    dtype = host_dtype(name)
    data = _arrays(cp, name)
    wide = compare.widen(data)
    for got in (data, compare.sentinel_array(dtype, (8, 8))):
        got = cp.asarray(got)
        compare.compare_elementwise(got, wide, atol=1e-5, rtol=1e-5)
        compare.compare_elementwise(got.reshape(-1)[:1], wide.reshape(-1)[:1], atol=0, rtol=0)
        compare.compare_sum(got, 1.0, atol=1e-6, rtol=1e-6)
        _checks(cp, got)
    wide.fill(0)


def _oracle(cp: Any, name: str, oracle: str) -> None:
    dtype = host_dtype(name)
    data = cp.zeros((8, 8), dtype=dtype)
    shape: tuple[int, ...] = (8, 8)
    ins = [data, data]
    if oracle in ("sum", "dot"):
        shape = (1,)
    elif oracle == "conv1d":
        ins = [data.reshape(-1), data.reshape(-1)[:3]]
        shape = (64,)
    elif oracle == "conv2d":
        ins = [data, data[:3, :3].copy()]
    answer = oracles.compute(oracle, ins, [2.0], shape, dtype)
    answer.fill(0)


def lab_dtypes(lab: LabSpec) -> list[str]:
    """The array types of the lab's parameters that a child does not warm ahead (AHEAD)."""
    used = {p.dtype for p in lab.params if p.is_array}
    return [name for name in ARRAY_DTYPES if name in used and name not in AHEAD]


def steps(dtypes: list[str] | None = None, *, fused: bool = True) -> list[Callable[[], None]]:
    """Every grader kernel's path for the array `dtypes` (default all, and with `fused` the
    timed repetitions' fused checks, graders.run.quick, and their launch gate), in small
    steps of a few hundredths of a second of GPU work each: see `run_locked`."""
    import cupy as cp

    out: list[Callable[[], None]] = []
    for name in list(ARRAY_DTYPES) if dtypes is None else dtypes:
        dtype = host_dtype(name)
        floats = compare.is_float_data(dtype)
        out += [functools.partial(_reduction, cp, name, size, floats) for size in REDUCTION_SIZES]
        out.append(functools.partial(_comparisons, cp, name))
        out += [functools.partial(_oracle, cp, name, o) for o in oracles.BUILTIN_ORACLES]
    if fused:
        out += [quick.exercise, _launch_gate]
    return out


def _launch_gate() -> None:
    """The timed section's launch gate (graders.timing.repetitions.LaunchGate), opened and
    closed once."""
    import cupy as cp

    from graders.timing.repetitions import LaunchGate

    gate = LaunchGate()
    gate.close()
    gate.open()
    cp.cuda.get_current_stream().synchronize()


def run_locked(todo: list[Callable[[], None]], lock: GpuLock) -> None:
    """Run the steps, each under its own short shared hold of the GPU's lock that ends with
    its work done: a timed section that comes meanwhile waits for one step, never for a whole
    warm-up or data type (graders.run.child.warm_up, the kernel cache's builders)."""
    import cupy as cp

    device = cp.cuda.Device()
    for step in todo:
        with lock.shared():
            step()
            device.synchronize()
