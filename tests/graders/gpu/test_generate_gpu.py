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
]
SHAPES = [(1,), (1000,), (63, 70), (1 << 20,)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint32", "int64"])
def test_device_values_equal_the_numpy_twin_bit_for_bit(dtype: str) -> None:
    import cupy as cp

    for init in INITS:
        if init.dist == "integers" and init.high == 2**32 - 1 and dtype == "int32":
            continue  # wraps in both, but says nothing more
        for shape in SHAPES:
            key = generate.stream_key(12345, f"{dtype}-{init.dist}-{shape}")
            host = generate.host_values(init, dtype, shape, {}, key)
            device = cp.empty(shape, dtype=dtype)
            generate.device_fill(device, init, {}, key)
            unsigned = np.dtype(f"u{np.dtype(dtype).itemsize}")
            got = device.get()
            assert np.array_equal(got.view(unsigned), host.view(unsigned)), (init, shape)


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
