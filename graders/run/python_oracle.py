"""A lab's trusted Python oracle (`oracle.py`): load it, call it, and check what it returns.

The contract (reference_kernels/SPEC_FORMAT.md, "A Python oracle"):

    expected(inputs, sizes, scalars) -> {output name: array}
    check(outputs, expected, inputs, sizes) -> bool | (bool, str)        (optional)

- `inputs`: every input array (kind "in" or "inout", its contents before the launch) by name,
  as read-only NumPy arrays of the param's dtype (uint8, int32, float16, float32, ...);
  bfloat16 arrays come as float32 values.
- `sizes`: the case's `sizes` table (whole numbers, and floats such as alpha).
- `scalars`: every scalar param's value as the kernel receives it, as a Python int or float.
- `expected` returns a dict with an entry for every output compared with an answer (check
  "elementwise" or "sum"; a bare array where there is only one): an array of exactly the
  output's shape for "elementwise", one number for "sum". NumPy or CuPy arrays; float outputs
  are read as float64 (compute in float64), integer outputs must be integers.
- `check` (when defined) runs after the built-in checks of every output passed: `outputs` are
  the kernel's outputs by name (NumPy, bfloat16 as float32), `expected` is what `expected`
  returned, checked as above. It returns True or False, or (passed, message): the message
  is shown to the student.

This module only needs NumPy; the run stage calls it inside the sandboxed child. Anything the
oracle does wrong raises `OracleCodeError`, whose message names oracle.py's line: it is the
lab's fault, never the student's.
"""

from __future__ import annotations

import hashlib
import traceback
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from graders.run.host_dtypes import readable
from graders.spec import CaseSpec, LabSpec, ParamSpec
from graders.spec.dtypes import FLOAT_DTYPES
from graders.spec.expr import Number
from graders.text import visible_text

MAX_MESSAGE_BYTES = 2000
_MODULES: dict[tuple[str, str], types.ModuleType] = {}


class OracleCodeError(RuntimeError):
    """The lab's oracle.py failed or returned something unusable; the message says where."""


@dataclass(frozen=True)
class CheckVerdict:
    passed: bool
    message: str


def _where(exc: BaseException, filename: str) -> str:
    """`oracle.py line 7, in expected` for the innermost frame of the oracle's own file."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    if not frames:
        return filename.rsplit("/", 1)[-1]
    last = frames[-1]
    return f"{last.filename.rsplit('/', 1)[-1]} line {last.lineno}, in {last.name}"


def load(lab: LabSpec) -> types.ModuleType:
    """Run the lab's oracle.py (the text the spec loaded) once per process and file content."""
    spec = lab.python_oracle
    if spec is None:
        raise OracleCodeError(f"The lab {lab.id} has no Python oracle (expected.oracle).")
    path = str(lab.folder / spec.file)
    key = (path, hashlib.sha256(spec.source.encode()).hexdigest())
    if key in _MODULES:
        return _MODULES[key]
    module = types.ModuleType(f"kernelgrader_oracle_{lab.id.replace('-', '_')}")
    module.__file__ = path
    try:
        exec(compile(spec.source, path, "exec"), module.__dict__)  # trusted instructor code
    except Exception as exc:
        raise OracleCodeError(
            f"The lab's {spec.file} failed when loaded ({_where(exc, path)}): "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    for name in ("expected", "check") if spec.has_check else ("expected",):
        if not callable(getattr(module, name, None)):
            raise OracleCodeError(f"The lab's {spec.file} defines no function {name}().")
    _MODULES[key] = module
    return module


def _frozen(array: np.ndarray) -> np.ndarray:
    out = np.array(array, copy=True)
    out.setflags(write=False)
    return out


def oracle_inputs(lab: LabSpec, host: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every input array as the oracle reads it: a read-only copy, bfloat16 as float32."""
    return {
        p.name: _frozen(readable(p.dtype, host[p.name]))
        for p in lab.params
        if p.is_array and p.is_input
    }


def oracle_scalars(lab: LabSpec, scalars: Mapping[str, Any]) -> dict[str, Number]:
    """Every scalar as a Python number (NumPy scalars of the param's dtype are accepted)."""
    out: dict[str, Number] = {}
    for p in lab.params:
        if p.is_array:
            continue
        value = scalars[p.name]
        out[p.name] = float(value) if p.dtype in FLOAT_DTYPES else int(value)
    return out


def _to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "__cuda_array_interface__") and hasattr(value, "get"):
        value = value.get()  # a CuPy array
    return np.asarray(value)


def _answer(lab: LabSpec, param: ParamSpec, value: Any, shape: tuple[int, ...]) -> np.ndarray:
    """One output's expected answer, checked against the contract and widened for comparing."""
    file = lab.python_oracle.file if lab.python_oracle else "oracle.py"
    what = f"{file}: expected() returned for {param.name!r}"
    try:
        array = _to_numpy(value)
    except Exception as exc:
        raise OracleCodeError(f"{what} something that is not an array ({exc}).") from exc
    if array.dtype.kind not in "biuf":
        raise OracleCodeError(
            f"{what} an array of {array.dtype}; return numbers (float64 for a float output)."
        )
    if param.check == "sum":
        if array.size != 1:
            raise OracleCodeError(
                f"{what} {array.size} numbers; its check is 'sum', so return the one total."
            )
        return array.astype(np.float64).reshape(1)
    if array.shape != shape:
        raise OracleCodeError(
            f"{what} an array of shape {list(array.shape)}; {param.name} has shape {list(shape)} "
            "in this case."
        )
    if param.dtype in FLOAT_DTYPES:
        return array.astype(np.float64)
    if array.dtype.kind == "f":
        raise OracleCodeError(
            f"{what} {array.dtype} values, but {param.name} is {param.dtype}: return integers "
            "(e.g. with .astype(np.int64)) so it can be compared exactly."
        )
    return array.astype(np.uint64 if param.dtype == "uint64" else np.int64)


def expected_outputs(
    lab: LabSpec,
    case: CaseSpec,
    inputs: Mapping[str, np.ndarray],
    scalars: Mapping[str, Number],
    declarations: Mapping[str, int] | None = None,
) -> dict[str, np.ndarray]:
    """Call expected() for one case; `inputs` and `scalars` as `oracle_inputs`/`oracle_scalars`
    make them, `declarations` the submission's (output shapes may depend on them). Returns an
    answer for every output that needs one (and any other output the oracle returned, for
    check())."""
    module = load(lab)
    names = lab.sizes_for(case, declarations)
    file = lab.python_oracle.file if lab.python_oracle else "oracle.py"
    try:
        result = module.expected(inputs, dict(case.sizes), dict(scalars))
    except Exception as exc:
        path = str(lab.folder / file)
        raise OracleCodeError(
            f"The lab's expected() failed on case {case.name} ({_where(exc, path)}): "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    outputs = [p for p in lab.params if p.is_output]
    answered = [p for p in outputs if p.needs_answer]
    if not isinstance(result, Mapping):
        if len(answered) != 1:
            raise OracleCodeError(
                f"{file}: expected() returned a {type(result).__name__}; return a dict with an "
                f"entry for each of {', '.join(p.name for p in answered) or 'the outputs'}."
            )
        result = {answered[0].name: result}
    by_name = {p.name: p for p in outputs}
    for key in result:
        if key not in by_name:
            raise OracleCodeError(
                f"{file}: expected() returned {key!r}, which is not an output of the lab "
                f"(the outputs are {', '.join(by_name)})."
            )
    for p in answered:
        if p.name not in result:
            raise OracleCodeError(
                f"{file}: expected() returned no answer for the output {p.name!r} (its check is "
                f"{p.check!r})."
            )
    return {
        key: _answer(lab, by_name[key], value, by_name[key].shape_for(names))
        for key, value in result.items()
    }


def run_check(
    lab: LabSpec,
    case: CaseSpec,
    outputs: Mapping[str, np.ndarray],
    expected: Mapping[str, np.ndarray],
    inputs: Mapping[str, np.ndarray],
) -> CheckVerdict:
    """Call check() for one case. `outputs` are the kernel's host arrays by output name (in the
    host representation: bfloat16 as bits); the oracle sees readable, read-only copies."""
    module = load(lab)
    file = lab.python_oracle.file if lab.python_oracle else "oracle.py"
    seen = {p.name: _frozen(readable(p.dtype, outputs[p.name])) for p in lab.params if p.is_output}
    try:
        verdict = module.check(seen, dict(expected), inputs, dict(case.sizes))
    except Exception as exc:
        path = str(lab.folder / file)
        raise OracleCodeError(
            f"The lab's check() failed on case {case.name} ({_where(exc, path)}): "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    message = ""
    if isinstance(verdict, tuple) and len(verdict) == 2 and isinstance(verdict[1], str):
        verdict, message = verdict
    if not isinstance(verdict, bool | np.bool_):
        raise OracleCodeError(
            f"{file}: check() returned {verdict!r}; return True or False, or a pair "
            "(passed, message)."
        )
    passed = bool(verdict)
    if not message:
        message = "The lab's check passed." if passed else "The lab's check of the outputs failed."
    return CheckVerdict(passed, visible_text(message, limit=MAX_MESSAGE_BYTES))
