"""The grader's own GPU kernels, each run once: CuPy compiles (or loads) them here.

CuPy compiles an elementwise or reduction kernel the first time it meets a dtype combination;
with an empty cache that took seconds per grading. `exercise()` walks every path the run stage
takes for the built-in labs' dtypes (generating, filling, checking guards, comparing, each
oracle), so that after it the kernels are in CuPy's disk cache (a trusted build, see
graders.run.kernel_cache) or loaded in this process (a prestarted child's warm-up).

A reduction's kernel also depends on the size it reduces: CuPy's CUB reductions use a block of
32 to 512 threads, a quarter of the size rounded up to a power of two (measured on an H100: 6
such kernels compiled per grading, 15 s of a 17 s run stage, before `REDUCTION_SIZES` was
added), so the comparisons run once at a size for each block.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graders.run import compare, oracles
from graders.run.generate import device_fill
from graders.run.inputs import DTYPES

# A size for each CUB block size (32, 64, 128, 256, 512 threads of 4 items each), and two
# small ones for CuPy's own reduction kernel where CUB is not used.
REDUCTION_SIZES = (1, 40, 100, 200, 400, 800, 5000)

_DISTS: list[dict[str, Any]] = [
    {"dist": "uniform", "low": -1.0, "high": 1.0},
    {"dist": "integers", "low": -3, "high": 3},
    {"dist": "constant", "value": 0},
]


def _arrays(cp: Any, dtype: np.dtype) -> Any:
    data = cp.empty((8, 8), dtype=dtype)
    for init in _DISTS:
        device_fill(data, init, {}, 7)
    unsigned = np.dtype(f"u{dtype.itemsize}")
    raw = cp.empty(4 * dtype.itemsize * 8, dtype=cp.uint8)
    raw.view(unsigned).fill(compare.guard_value(dtype))
    bool((raw.view(unsigned) != compare.guard_value(dtype)).any())
    cp.flatnonzero(raw == 0)
    other = data.copy()
    bool((data.view(unsigned) != other.view(unsigned)).any())
    return data


def _reductions(cp: Any, dtype: np.dtype) -> None:
    """The comparisons and guard checks at a size for each reduction block size."""
    unsigned = np.dtype(f"u{dtype.itemsize}")
    for size in REDUCTION_SIZES:
        data = cp.empty(size, dtype=dtype)
        device_fill(data, _DISTS[0 if dtype.kind == "f" else 1], {}, size)
        wide = data.astype(np.int64 if dtype.kind in "iu" else np.float64)
        compare.compare_elementwise(data, wide, atol=1e-5, rtol=1e-5)
        compare.compare_sum(data, 1.0, atol=1e-6, rtol=1e-6)
        bool((data.view(unsigned) != compare.guard_value(dtype)).any())
        wide.fill(0)


def exercise(dtypes: list[str] | None = None) -> None:
    """Run every grader kernel once (for `dtypes`, default all); safe in any GPU process."""
    import cupy as cp

    for name in dtypes or list(DTYPES):
        dtype = np.dtype(DTYPES[name])
        _reductions(cp, dtype)
        data = _arrays(cp, dtype)
        wide = data.astype(np.int64 if dtype.kind in "iu" else np.float64)
        for got in (data, compare.sentinel_array(dtype, (8, 8))):
            got = cp.asarray(got)
            compare.compare_elementwise(got, wide, atol=1e-5, rtol=1e-5)
            compare.compare_elementwise(got.reshape(-1)[:1], wide.reshape(-1)[:1], atol=0, rtol=0)
            compare.compare_sum(got, 1.0, atol=1e-6, rtol=1e-6)
        ins = [data, data]
        for oracle in oracles.BUILTIN_ORACLES:
            shape: tuple[int, ...] = (8, 8)
            if oracle in ("sum", "dot"):
                shape = (1,)
            elif oracle == "conv1d":
                ins = [data.reshape(-1), data.reshape(-1)[:3]]
                shape = (64,)
            elif oracle == "conv2d":
                ins = [data, data[:3, :3].copy()]
            else:
                ins = [data, data]
            answer = oracles.compute(oracle, ins, [2.0], shape, dtype)
            answer.fill(0)
        wide.fill(0)
    cp.cuda.Device().synchronize()
