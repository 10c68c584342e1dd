"""Seeded test inputs: the same lab and case always give the same data, hidden ones unguessable.

The seed of a case comes from the lab, the case and a base seed that does not depend on the
submission, so every student is graded on the same data and a result can be reproduced from
its stored seed. Hidden cases also mix in a per-deployment secret, so their data cannot be
computed ahead from the public repository. The data itself is made on the GPU by
`graders.run.generate`; `generate_arrays` here is its exact NumPy twin, for staff and tests.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from graders.run.generate import host_values, scalar_value, stream_key
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


def dtype_of(param: Any) -> np.dtype:
    name = str(field(param, "dtype"))
    if name not in DTYPES:
        raise ValueError(f"Parameter {field(param, 'name')} has an unknown dtype {name!r}.")
    return np.dtype(DTYPES[name])


def shape_of(param: Any, names: Mapping[str, float]) -> tuple[int, ...]:
    shape = field(param, "shape") or []
    return tuple(int(expr.evaluate(s, names)) for s in shape)


def input_params(params: list[Any]) -> list[Any]:
    """The array params that start with data: kind in/inout, or any array with an `init`."""
    out = []
    for param in params:
        kind = field(param, "kind")
        if kind in ARRAY_KINDS and (field(param, "init") is not None or kind in ("in", "inout")):
            out.append(param)
    return out


def init_of(param: Any) -> Any:
    init = field(param, "init")
    return init if init is not None else {"dist": "uniform", "low": -1.0, "high": 1.0}


def generate_arrays(
    params: list[Any], names: Mapping[str, float], seed: int, *, nonce: int = 0, rep: int = -1
) -> dict[str, np.ndarray]:
    """Host data for every array that starts with data: what the device makes, bit for bit."""
    arrays: dict[str, np.ndarray] = {}
    for param in input_params(params):
        name = field(param, "name")
        key = stream_key(seed, name, nonce=nonce, rep=rep)
        arrays[name] = host_values(
            init_of(param), dtype_of(param), shape_of(param, names), names, key
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
            raw = scalar_value(init, dtype, names, stream_key(seed, name)).item()
        else:
            raw = expr.evaluate(name, names)
        values[name] = dtype.type(raw)
    return values
