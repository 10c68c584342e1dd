"""Seeded test inputs: the same lab and case always give the same data, hidden ones unguessable.

The seed of a case comes from the lab, the case and a base seed that does not depend on the
submission, so every student is graded on the same data and a result can be reproduced from
its stored seed. Hidden cases also mix in a per-deployment secret, so their data cannot be
computed ahead from the public repository. The data itself is made on the GPU by
`graders.run.generate`; `generate_arrays` here is its exact NumPy twin, for staff and tests.

An input a case writes by hand (`cases[].inputs`) is uploaded as written. A timed repetition
needs data no kernel has seen, so there such an input is generated from its `init` with the
repetition's key (the loader refuses a timed case that writes by hand an input without one).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from graders.run.generate import host_values, scalar_value, stream_key
from graders.run.host_dtypes import host_dtype, narrow
from graders.spec import LabSpec, expr
from graders.spec.dtypes import DTYPE_BYTES, FLOAT_DTYPES

# Changing this changes every visible case's data; keep it fixed for a course's lifetime.
DEFAULT_BASE_SEED = 20261121
ARRAY_KINDS = ("in", "out", "inout", "scratch")
# spec dtype -> the NumPy type that holds its data (bfloat16 as uint16 bits).
DTYPES: dict[str, type] = {name: host_dtype(name).type for name in DTYPE_BYTES}
# What a source of an input's data is: a generator key, or the hand-written values.
Source = int | np.ndarray


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
                "set KERNELGRADER_GRADING_SECRET."
            )
        digest = hmac.new(secret.encode(), message.encode(), hashlib.sha256).digest()
    else:
        digest = hashlib.sha256(message.encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def case_seeds(lab: LabSpec, secret: str) -> dict[str, int]:
    """Every case's seed of the lab, by case name."""
    return {c.name: case_seed(lab.id, c.name, hidden=c.hidden, secret=secret) for c in lab.cases}


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


def literal_array(param: Any, literal: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Hand-written values (a LiteralInput's, row-major) as the input's host data."""
    dtype = str(field(param, "dtype"))
    values = field(literal, "values")
    if dtype in FLOAT_DTYPES:
        data = narrow(np.asarray(values, dtype=np.float64), dtype)
    else:
        data = np.asarray(values).astype(host_dtype(dtype))
    return np.ascontiguousarray(data.reshape(shape))


def input_sources(
    params: list[Any],
    names: Mapping[str, float],
    seed: int,
    *,
    literals: Mapping[str, Any] | None = None,
    nonce: int = 0,
    rep: int = -1,
) -> dict[str, Source]:
    """Where each input's data comes from: the hand-written values of the case (`literals`,
    CaseSpec.inputs), or the generator's key for the case (rep -1) or a timed repetition."""
    out: dict[str, Source] = {}
    for param in input_params(params):
        name = field(param, "name")
        literal = (literals or {}).get(name)
        if literal is not None and (rep < 0 or field(param, "init") is None):
            out[name] = literal_array(param, literal, shape_of(param, names))
        else:
            out[name] = stream_key(seed, name, nonce=nonce, rep=rep)
    return out


def host_data(param: Any, source: Source, names: Mapping[str, float]) -> np.ndarray:
    """One input's data on the host, from its source: exactly what the device holds."""
    if isinstance(source, np.ndarray):
        return source.copy()
    return host_values(
        init_of(param), str(field(param, "dtype")), shape_of(param, names), names, source
    )


def generate_arrays(
    params: list[Any],
    names: Mapping[str, float],
    seed: int,
    *,
    literals: Mapping[str, Any] | None = None,
    nonce: int = 0,
    rep: int = -1,
) -> dict[str, np.ndarray]:
    """Host data for every array that starts with data: what the device makes, bit for bit."""
    sources = input_sources(params, names, seed, literals=literals, nonce=nonce, rep=rep)
    by_name = {field(p, "name"): p for p in params}
    return {name: host_data(by_name[name], src, names) for name, src in sources.items()}


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
