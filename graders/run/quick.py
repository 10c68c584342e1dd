"""The cheap check of a timed repetition: the output against a trusted kernel's, in one pass.

Checking every timed repetition in full costs what the lab's oracle costs (a float64 matrix
product, or a Python oracle on the host: 2 to 240 ms a repetition, measured on an H200 against
0.05 to 2 ms kernels). Between the full checks, drawn at random (graders.timing.repetitions),
each repetition's output is compared with the output of a trusted reference kernel run on the
same inputs made again: one fused pass that counts the elements further apart than the two
answers' tolerances together (each is within the lab's tolerance of the exact answer, so a right
output is never further than twice that from the reference's), NaN, infinities and the
never-written marker among them. An answer kept from an earlier launch, or work skipped, is far
from the reference's on new inputs.

Integers compare exactly; bfloat16 (stored as 16-bit patterns) goes the slow way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_FLOAT_PREAMBLE = r"""
__device__ long long kg_far(double g, double r, double atol, double rtol) {
    if (isnan(r)) return isnan(g) ? 0 : 1;
    if (isinf(r)) return g == r ? 0 : 1;
    double d = fabs(g - r);
    return d <= atol + rtol * fabs(r) ? 0 : 1;
}
"""

_kernels: dict[str, Any] = {}


def _far_float() -> Any:
    import cupy as cp

    if "float" not in _kernels:
        _kernels["float"] = cp.ReductionKernel(
            "T g, T r, float64 atol, float64 rtol",
            "int64 n",
            "kg_far((double)g, (double)r, atol, rtol)",
            "a + b",
            "n = a",
            "0",
            "kg_count_far",
            preamble=_FLOAT_PREAMBLE,
        )
    return _kernels["float"]


def _differ_int() -> Any:
    import cupy as cp

    if "int" not in _kernels:
        _kernels["int"] = cp.ReductionKernel(
            "T g, T r", "int64 n", "g != r ? 1 : 0", "a + b", "n = a", "0", "kg_count_differ"
        )
    return _kernels["int"]


def fused(dtype: Any) -> bool:
    """Whether outputs of this dtype are counted in one fused pass."""
    dtype = np.dtype(dtype)
    return dtype in (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)) or (
        dtype.kind in "iu" and dtype != np.uint16
    )


def count_far(got: Any, ref: Any, *, atol: float, rtol: float) -> Any:
    """A 0-d device array: how many elements of `got` are not within twice the tolerance of
    `ref`'s (NaN, infinities and the never-written marker count as far). No synchronisation."""
    got = got.reshape(-1)
    ref = ref.reshape(-1)
    if np.dtype(got.dtype).kind in "iu":
        return _differ_int()(got, ref)
    return _far_float()(got, ref, 2.0 * atol, 2.0 * rtol * (1.0 + rtol))


def exercise() -> None:
    """Compile (or load) the kernels for every dtype they serve, at a size per reduction shape,
    and the sum of counts a repetition's check adds up (graders.run.timed): CuPy compiled that
    addition in every run child, within its timed section, until it was warmed here."""
    import cupy as cp

    for dtype in (cp.float32, cp.float64, cp.float16, cp.int32, cp.uint32, cp.int64, cp.uint8):
        for size in (1, 40, 5000, 1 << 20):
            a = cp.zeros(size, dtype=dtype)
            far = count_far(a, a, atol=1e-5, rtol=1e-5).astype(cp.int64)
            int(far + cp.count_nonzero(a))
