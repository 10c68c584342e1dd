"""Inputs made on the GPU are exactly their NumPy twin's, in every process, for every dtype."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from graders.run import generate
from graders.spec import InitSpec

ROOT = Path(__file__).resolve().parents[3]
INITS = [
    InitSpec("uniform", -1.0, 1.0),
    InitSpec("uniform", 1.5, 4.0),
    InitSpec("integers", -3, 3),
    InitSpec("integers", 0, 2**32 - 1),
    InitSpec("constant", value=7),
    InitSpec("zeros"),
    InitSpec("normal", mean=0.0, std=1.0),
    InitSpec("normal", mean=128, std=40),
    InitSpec("normal", mean=-3.5, std=1e9),  # clipped for every integer dtype
]
SHAPES = [(1,), (1000,), (63, 70), (1 << 20,)]
ARRAY_DTYPES = ["float32", "float64", "int32", "uint32", "int64", "uint8", "float16", "bfloat16"]
# Integers that do not fit a dtype wrap in both, but say nothing more.
_SKIP = {("int32", 2**32 - 1), ("uint8", 2**32 - 1), ("uint8", -3), ("uint32", -3)}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ARRAY_DTYPES)
def test_device_values_equal_the_numpy_twin_bit_for_bit(dtype: str) -> None:
    import cupy as cp

    from graders.run.host_dtypes import host_dtype

    for init in INITS:
        if init.dist == "integers" and ((dtype, init.high) in _SKIP or (dtype, init.low) in _SKIP):
            continue
        for shape in SHAPES:
            key = generate.stream_key(12345, f"{dtype}-{init}-{shape}")
            host = generate.host_values(init, dtype, shape, {}, key)
            device = cp.empty(shape, dtype=host_dtype(dtype))
            generate.device_fill(device, init, {}, key, dtype=dtype)
            unsigned = np.dtype(f"u{host.dtype.itemsize}")
            got = device.get()
            wrong = int((got.view(unsigned) != host.view(unsigned)).sum())
            assert wrong == 0, (init, shape, wrong)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_width_floats_equal_the_twin_where_they_round_hardest(dtype: str) -> None:
    """Subnormals, overflow to infinity and values on rounding boundaries, through the device's
    conversions (PTX cvt for float16, integer rounding for bfloat16)."""
    import cupy as cp

    from graders.run.host_dtypes import host_dtype

    for init in (
        InitSpec("uniform", -1e-5, 1e-5),
        InitSpec("uniform", -7e4, 7e4),
        InitSpec("normal", mean=0.0, std=3e4),
        InitSpec("uniform", 1.0, 1.0078125),
    ):
        key = generate.stream_key(99, f"{dtype}-{init}")
        host = generate.host_values(init, dtype, (1 << 20,), {}, key)
        device = cp.empty(1 << 20, dtype=host_dtype(dtype))
        generate.device_fill(device, init, {}, key, dtype=dtype)
        unsigned = np.dtype(np.uint16)
        assert np.array_equal(device.get().view(unsigned), host.view(unsigned)), init


_IN_ANOTHER_PROCESS = r"""
import hashlib, json, sys
import cupy as cp
from graders.run import generate
from graders.spec import InitSpec
key = generate.stream_key(int(sys.argv[1]), "A")
out = cp.empty((1023, 1025), dtype=cp.float32)
generate.device_fill(out, InitSpec("uniform", -1.0, 1.0), {}, key)
print(json.dumps(hashlib.sha256(out.get().tobytes()).hexdigest()))
"""


@pytest.mark.gpu
def test_the_same_seed_gives_the_same_data_in_every_process() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def digest(seed: int) -> str:
        done = subprocess.run(
            [sys.executable, "-c", _IN_ANOTHER_PROCESS, str(seed)],
            capture_output=True, text=True, env=env, timeout=300, check=True,
        )  # fmt: skip
        return str(json.loads(done.stdout.strip().splitlines()[-1]))

    first, second, other = digest(77), digest(77), digest(78)
    host = generate.host_values(
        InitSpec("uniform", -1.0, 1.0), "float32", (1023, 1025), {}, generate.stream_key(77, "A")
    )
    assert first == second == hashlib.sha256(host.tobytes()).hexdigest()
    assert other != first
