"""Plausible host data for one case, to try a lab's own Python code before students meet it.

Not the grading data (the run stage makes that, seeded, on the device): only arrays of the
right dtype, shape and distribution, so `lab check` can call expected() and check() and see
that they run and answer in the shapes the outputs have.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graders.run.host_dtypes import bfloat16_bits, host_dtype
from graders.spec import CaseSpec, InitSpec, LabSpec
from graders.spec.dtypes import FLOAT_DTYPES, INT_RANGES
from graders.spec.expr import Number, evaluate


def _draw(
    init: InitSpec,
    dtype: str,
    shape: tuple[int, ...],
    names: dict[str, Number],
    rng: np.random.Generator,
) -> np.ndarray:
    e = {k: evaluate(v, names) for k, v in init.expressions.items()}
    floats = dtype in FLOAT_DTYPES
    if init.dist == "zeros":
        values: np.ndarray = np.zeros(shape)
    elif init.dist == "constant":
        values = np.full(shape, e["value"], dtype=np.float64)
    elif init.dist == "normal":
        values = rng.normal(e["mean"], e["std"], size=shape)
        if not floats:
            low, high = INT_RANGES[dtype]
            values = np.clip(np.rint(values), max(low, -(2**62)), min(high, 2**62))
    elif init.dist == "integers" or not floats:
        values = rng.integers(int(e["low"]), int(e["high"]), size=shape, endpoint=True)
    else:
        values = rng.uniform(e["low"], e["high"], size=shape)
    return _as_dtype(values, dtype)


def _as_dtype(values: Any, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return bfloat16_bits(np.asarray(values, dtype=np.float32))
    return np.asarray(values).astype(host_dtype(dtype))


def sample_case(
    lab: LabSpec, case: CaseSpec, seed: int = 0
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(host arrays of the inputs, scalar values) for one case: hand-written values where the
    case gives them, else drawn from each param's distribution."""
    names = lab.sizes_for(case)
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    scalars: dict[str, Any] = {}
    for p in lab.params:
        if p.is_array and p.is_input:
            shape = p.shape_for(names)
            literal = case.inputs.get(p.name)
            if literal is not None:
                arrays[p.name] = _as_dtype(np.array(literal.values).reshape(shape), p.dtype)
            else:
                assert p.init is not None  # the loader refuses an input without data
                arrays[p.name] = _draw(p.init, p.dtype, shape, names, rng)
        elif not p.is_array:
            if p.value is not None:
                value = p.value_for(names)
            else:
                assert p.init is not None
                value = _draw(p.init, p.dtype, (), names, rng).item()
            scalars[p.name] = np.dtype(p.dtype).type(value)
    return arrays, scalars


def sample_outputs(
    lab: LabSpec, answers: dict[str, np.ndarray], case: CaseSpec
) -> dict[str, np.ndarray] | None:
    """The oracle's answers as a kernel would have written them (rounded to each output's
    dtype), or None when the oracle did not answer every output."""
    names = lab.sizes_for(case)
    out: dict[str, np.ndarray] = {}
    for p in lab.params:
        if not p.is_output:
            continue
        if p.name not in answers or p.check == "sum":
            return None
        out[p.name] = _as_dtype(answers[p.name].reshape(p.shape_for(names)), p.dtype)
    return out
