"""The native launcher's job (graders/sanitizer/launcher.c): one case of one submission, as bytes.

Made in the sanitizer's sandboxed child from the same plans the graded run uses, so the launcher
lays the case out as a graded run does: the arrays in an order and with spacers drawn by
graders.run.buffers.allocation_plan (without the tails: the tools' padding stands there), the
inputs' data from the generator's NumPy twin (graders.run.inputs.generate_arrays: the bits the
device makes), outputs and plain scratch arrays filled with the never-written marker, and the
lab's launches with their arguments from graders.run.harness.LaunchPlan. Each tool's run draws
its own layout, as each of the Python programs did.

The format is the one launcher.c's header states: little-endian 8-byte fields, byte strings
padded to 8.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from graders.run.buffers import allocation_plan, sentinel_bits
from graders.run.harness import LaunchPlan
from graders.run.inputs import generate_arrays, scalar_values
from graders.run.layout import Layout
from graders.spec import LabSpec

MAGIC = b"KGJOB001"
FILL_NONE, FILL_DATA, FILL_PATTERN = 0, 1, 2
ARG_BUFFER, ARG_VALUE = 0, 1


@dataclass(frozen=True)
class _Buffer:
    index: int  # the buffer's place in the job (allocation order)


def _u64(value: int) -> bytes:
    return struct.pack("<Q", value)


def _bytes(data: bytes) -> bytes:
    return _u64(len(data)) + data + b"\0" * (-len(data) % 8)


@dataclass(frozen=True)
class CaseData:
    """What every tool's job of one case shares: the inputs' data and the scalars."""

    names: dict[str, Any]
    data: dict[str, np.ndarray]
    scalars: dict[str, Any]
    literals: Mapping[str, Any]


def case_data(lab: LabSpec, case_name: str, seed: int, declarations: dict[str, Any]) -> CaseData:
    case = lab.case(case_name)
    names = lab.sizes_for(case, declarations)
    data = generate_arrays(lab.params, names, seed, literals=case.inputs)
    return CaseData(names, data, scalar_values(lab.params, names, seed), case.inputs)


def encode(
    lab: LabSpec,
    case: CaseData,
    cubin: bytes,
    *,
    timeout_s: float,
    printf_bytes: int,
    layout: Layout | None = None,
) -> bytes:
    """One tool's job: the case laid out afresh (or by `layout`)."""
    plan = allocation_plan(lab, case.names, guards=False, literals=case.literals, layout=layout)
    parts = [MAGIC, _u64(max(1, round(timeout_s * 1000))), _u64(printf_bytes), _bytes(cubin)]
    kernels = list(lab.kernels)
    parts += [_u64(len(kernels)), *(_bytes(k.encode()) for k in kernels)]
    parts.append(_u64(len(plan)))
    index: dict[str, int] = {}
    for i, slot in enumerate(plan):
        index[slot.param.name] = i
        source = case.data.get(slot.param.name)
        if source is not None:
            fill, content = FILL_DATA, np.ascontiguousarray(source, dtype=slot.dtype).tobytes()
        elif slot.param.kind in ("out", "scratch"):
            unsigned = np.dtype(f"u{slot.dtype.itemsize}")
            fill, content = FILL_PATTERN, np.array(sentinel_bits(slot.dtype), unsigned).tobytes()
        else:
            fill, content = FILL_NONE, b""
        parts += [_u64(slot.spacer), _u64(slot.nbytes), _u64(fill), _bytes(content)]
    steps = LaunchPlan.build_with(
        lab, dict(case.names), lambda name: _Buffer(index[name]), case.scalars
    ).steps
    parts.append(_u64(len(steps)))
    for step in steps:
        parts.append(_u64(kernels.index(step.kernel)))
        parts += [_u64(int(v)) for v in (*step.grid, *step.block, step.shared)]
        parts.append(_u64(len(step.args)))
        for arg in step.args:
            if isinstance(arg, _Buffer):
                parts += [_u64(ARG_BUFFER), _u64(arg.index)]
            else:
                parts += [_u64(ARG_VALUE), _bytes(np.asarray(arg).tobytes())]
    return b"".join(parts)


def largest_block(lab: LabSpec, case: CaseData) -> tuple[int, int]:
    """(threads, dynamic shared bytes) of the case's largest launch, for a refusal's sentence."""
    steps = LaunchPlan.build_with(lab, dict(case.names), lambda name: name, case.scalars).steps
    step = max(steps, key=lambda s: (s.threads, s.shared))
    return step.threads, step.shared
