"""Seeded test inputs: the same lab and case always give the same data, hidden ones unguessable.

The seed of a case comes from the lab, the case and a base seed that does not depend on the
submission, so every student is graded on the same data and a result can be reproduced from
its stored seed. Hidden cases also mix in a per-deployment secret, so their data cannot be
computed ahead from the public repository.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from graders.spec import expr

# Changing this changes every visible case's data; keep it fixed for a course's lifetime.
DEFAULT_BASE_SEED = 20261121
ARRAY_KINDS = ("in", "out", "inout", "scratch")
DTYPES = {
    "float32": np.float32,
    "float64": np.float64,
    "int32": np.int32,
    "uint32": np.uint32,
    "int64": np.int64,
}


def field(obj: Any, name: str, default: Any = None) -> Any:
    """Read `name` from a spec object or a plain mapping (specs may be either)."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def base_seed() -> int:
    text = os.environ.get("KERNELGRADER_BASE_SEED", "")
    return int(text) if text.strip().isdigit() else DEFAULT_BASE_SEED


def case_seed(
    lab_id: str, case_name: str, *, hidden: bool, secret: str = "", base: int | None = None
) -> int:
    """A 63-bit seed for one case; hidden cases depend on the deployment's secret too."""
    message = f"kernelgrader/{lab_id}/{case_name}/{base_seed() if base is None else base}"
    if hidden:
        if not secret:
            raise ValueError(
                "A hidden case needs the deployment's secret to derive its seed; "
                "set KERNELGRADER_SECRET_KEY."
            )
        digest = hmac.new(secret.encode(), message.encode(), hashlib.sha256).digest()
    else:
        digest = hashlib.sha256(message.encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def param_rng(seed: int, name: str) -> np.random.Generator:
    """A generator per parameter, so adding a parameter leaves the others' data unchanged."""
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def dtype_of(param: Any) -> np.dtype:
    name = str(field(param, "dtype"))
    if name not in DTYPES:
        raise ValueError(f"Parameter {field(param, 'name')} has an unknown dtype {name!r}.")
    return np.dtype(DTYPES[name])


def shape_of(param: Any, names: Mapping[str, float]) -> tuple[int, ...]:
    shape = field(param, "shape") or []
    return tuple(int(expr.evaluate(s, names)) for s in shape)


def _draw(
    init: Any,
    rng: np.random.Generator,
    dtype: np.dtype,
    shape: tuple[int, ...],
    names: Mapping[str, float],
) -> np.ndarray:
    dist = str(field(init, "dist", "uniform"))
    low = expr.evaluate(field(init, "low", 0), names)
    high = expr.evaluate(field(init, "high", 1), names)
    if dist == "integers":
        return rng.integers(int(low), int(high), size=shape, endpoint=True, dtype=np.int64).astype(
            dtype
        )
    if dist == "constant" or dist == "zeros":
        value = 0 if dist == "zeros" else expr.evaluate(field(init, "value", 0), names)
        return np.full(shape, value, dtype=dtype)
    if dist != "uniform":
        raise ValueError(f"Unknown input distribution {dist!r}; use uniform or integers.")
    if np.issubdtype(dtype, np.integer):
        return rng.integers(int(low), int(high), size=shape, endpoint=True, dtype=np.int64).astype(
            dtype
        )
    # float32 draws are generated directly in float32: half the time and memory of float64.
    work = np.float32 if dtype == np.float32 else np.float64
    out = rng.random(size=shape, dtype=work)
    out *= work(high - low)
    out += work(low)
    return out.astype(dtype, copy=False)


def generate_arrays(
    params: list[Any], names: Mapping[str, float], seed: int
) -> dict[str, np.ndarray]:
    """Host data for every array that starts with data (kind in/inout, or any with `init`)."""
    arrays: dict[str, np.ndarray] = {}
    for param in params:
        kind = field(param, "kind")
        if kind not in ARRAY_KINDS:
            continue
        init = field(param, "init")
        if init is None and kind not in ("in", "inout"):
            continue
        dtype = dtype_of(param)
        shape = shape_of(param, names)
        init = init if init is not None else {"dist": "uniform", "low": -1.0, "high": 1.0}
        arrays[field(param, "name")] = _draw(
            init, param_rng(seed, field(param, "name")), dtype, shape, names
        )
    return arrays


def scalar_values(params: list[Any], names: Mapping[str, float], seed: int) -> dict[str, Any]:
    """The value of each scalar parameter, as a NumPy scalar of its dtype."""
    values: dict[str, Any] = {}
    for param in params:
        if field(param, "kind") != "scalar":
            continue
        dtype = dtype_of(param)
        name = field(param, "name")
        init = field(param, "init")
        value_expr = field(param, "value")
        if value_expr is not None:
            raw = expr.evaluate(value_expr, names)
        elif init is not None:
            raw = _draw(init, param_rng(seed, name), dtype, (), names).item()
        else:
            raw = expr.evaluate(name, names)
        values[name] = dtype.type(raw)
    return values
