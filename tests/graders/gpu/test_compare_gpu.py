"""The comparison on the device agrees with the same comparison done in float64 on the host.

Edge cases: NaN and infinities (expected and got), the sentinel (never written), a ragged
matrix whose first wrong element is in its last row, integers, and per-block sums.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from graders.run import compare, oracles


def _same(a: compare.Comparison, b: compare.Comparison) -> bool:
    """Field by field, a NaN equal to a NaN (a computed NaN is evidence too)."""
    for x, y in zip(dataclasses.astuple(a), dataclasses.astuple(b), strict=True):
        both_nan = isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)
        if x != y and not both_nan:
            return False
    return True


def _cases() -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(5)
    expected = rng.uniform(-1, 1, (63, 70))
    ragged = expected.astype(np.float32)
    ragged[62, 69] += 1.0
    ragged[40, 3] = np.nan
    unwritten = compare.sentinel_array(np.dtype(np.float32), (63, 70))
    partly = expected.astype(np.float32)
    partly[7:9, :] = compare.sentinel_array(np.dtype(np.float32), (2, 70))
    infinite = np.array([1.0, np.inf, -np.inf, np.nan, 3.0])
    got_inf = np.array([1.0, np.inf, np.inf, np.nan, np.nan], dtype=np.float32)
    last_only = expected.astype(np.float32)
    last_only[62, 69] = -5.0
    ints = np.arange(100, dtype=np.int64).reshape(10, 10)
    got_ints = ints.astype(np.int32)
    got_ints[9, 9] = 7
    return [
        ("right", expected, expected.astype(np.float32)),
        ("ragged", expected, ragged),
        ("unwritten", expected, unwritten),
        ("partly", expected, partly),
        ("infinities", infinite, got_inf),
        ("last-element", expected, last_only),
        ("integers", ints, got_ints),
        ("nan-expected", np.array([np.nan, 1.0]), np.array([np.nan, 1.0], dtype=np.float32)),
    ]


@pytest.mark.gpu
@pytest.mark.parametrize("name", [c[0] for c in _cases()])
def test_device_comparison_equals_the_host_one(name: str) -> None:
    import cupy as cp

    _, expected, got = next(c for c in _cases() if c[0] == name)
    host = compare.compare_elementwise(got, expected, atol=1e-5, rtol=1e-4)
    device = compare.compare_elementwise(
        cp.asarray(got), cp.asarray(expected), atol=1e-5, rtol=1e-4
    )
    assert _same(device, host), (device, host)
    if name == "ragged":
        assert host.first_wrong_index == (40, 3) and host.wrong_count == 2
    if name == "last-element":
        assert host.first_wrong_index == (62, 69) and host.got == -5.0


@pytest.mark.gpu
def test_device_sums_equal_the_host_ones() -> None:
    import cupy as cp

    partials = np.array([1.0, 2.5, -0.5], dtype=np.float32)
    for got in (partials, np.array([1.0, np.nan], dtype=np.float32),
                compare.sentinel_array(np.dtype(np.float32), (4,))):  # fmt: skip
        host = compare.compare_sum(got, 3.0, atol=1e-6, rtol=0)
        device = compare.compare_sum(cp.asarray(got), 3.0, atol=1e-6, rtol=0)
        assert _same(device, host), (device, host)


@pytest.mark.gpu
@pytest.mark.parametrize("oracle", oracles.BUILTIN_ORACLES)
def test_device_oracles_equal_the_float64_host_ones(oracle: str) -> None:
    import cupy as cp

    rng = np.random.default_rng(11)
    a = rng.uniform(-1, 1, (33, 47)).astype(np.float32)
    b = rng.uniform(-1, 1, (47, 29)).astype(np.float32)
    ins, shape = [a, b], (33, 29)
    if oracle == "scale":
        ins, shape = [a], a.shape
    elif oracle in ("hadamard",):
        ins, shape = [a, a[::-1].copy()], a.shape
    elif oracle in ("sum", "dot"):
        ins, shape = [a.ravel(), a.ravel()[::-1].copy()], (1,)
    elif oracle == "conv1d":
        ins, shape = [a.ravel(), a.ravel()[:7].copy()], (a.size,)
    elif oracle == "conv2d":
        ins, shape = [a, a[:5, :5].copy()], a.shape
    host = oracles.compute(oracle, ins, [2.5], shape, np.dtype(np.float32))
    device = oracles.compute(
        oracle, [cp.asarray(x) for x in ins], [2.5], shape, np.dtype(np.float32)
    )
    np.testing.assert_allclose(device.get(), host, rtol=1e-12, atol=1e-12)
