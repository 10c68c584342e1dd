"""One case's arrays on the device: generated inputs, sentinel-filled outputs, poisoned guards.

Every array the kernel gets lives inside a larger allocation with a guard band before and after
it. The guards hold a poison value of the array's dtype (NaN for floats), so a read past an
input spoils the answer rather than adding a harmless tiny number, and a write into them is
seen afterwards. A guard covers 33 rows of a matrix (at least 64 KiB): a tile loop that reads
a whole tile past the last row stays inside it.

Inputs are never kept in a second device copy while a student's kernel runs (it could find and
change that copy too): to check that an input is unchanged, or to compute the expected answer,
the generator makes the input again from its key (a hand-written input is uploaded again from
the child's host memory, which no kernel reaches).

Scratch arrays with an `init` get that data before every run (timed repetitions too); outputs,
and scratch arrays without one, get the sentinel.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graders.run import compare
from graders.run.generate import device_fill
from graders.run.inputs import DTYPES, Source, init_of, input_sources, literal_array
from graders.run.normal import STD_REACH
from graders.spec import LabSpec, ParamSpec, expr

MIN_GUARD_BYTES = 64 * 1024
MAX_GUARD_BYTES = 256 * 1024 * 1024
GUARD_ROWS = 33


def guard_bytes(shape: tuple[int, ...], itemsize: int) -> int:
    """Room for 33 rows of a matrix (a tile of rows past the end), at least 64 KiB."""
    row = math.prod(shape[1:]) if len(shape) > 1 else 1
    wanted = max(MIN_GUARD_BYTES, GUARD_ROWS * row * itemsize)
    wanted = min(wanted, MAX_GUARD_BYTES)
    return (wanted + 255) // 256 * 256


def _taken_range(
    param: ParamSpec, names: dict[str, Any], literal: np.ndarray | None
) -> tuple[float, float] | None:
    """The values an input's data can take (generated, or written by hand), so an integer
    guard can lie outside them."""
    ranges = []
    if literal is not None and literal.size:
        ranges.append((float(literal.min()), float(literal.max())))
    init = param.init
    if init is not None:
        e = {k: float(expr.evaluate(v, names)) for k, v in init.expressions.items()}
        if init.dist == "zeros":
            ranges.append((0.0, 0.0))
        elif init.dist == "constant":
            ranges.append((e["value"], e["value"]))
        elif init.dist == "normal":
            reach = STD_REACH * abs(e["std"])
            ranges.append((e["mean"] - reach, e["mean"] + reach))
        else:
            ranges.append((e["low"], e["high"]))
    if not ranges:
        return None
    return min(r[0] for r in ranges), max(r[1] for r in ranges)


@dataclass
class DeviceArray:
    param: ParamSpec
    dtype: np.dtype
    shape: tuple[int, ...]
    raw: Any  # cupy uint8 array: guard, data, guard
    view: Any  # cupy array of dtype and shape over the data
    guard: int
    guard_bits: Any  # the poison, as an unsigned integer of the dtype's width

    @property
    def name(self) -> str:
        return self.param.name

    @property
    def kind(self) -> str:
        return self.param.kind

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def _unsigned(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"u{dtype.itemsize}")


def _sentinel_bits(dtype: np.dtype) -> Any:
    """The sentinel as an unsigned integer of the same width, for a fast device fill."""
    if dtype in compare.SENTINEL_BITS:
        return compare.SENTINEL_BITS[dtype]
    return np.array(compare.SENTINEL_INTS[dtype], dtype=dtype).view(_unsigned(dtype))[()]


@dataclass
class DeviceArrays:
    """All of one case's arrays on the device, and where each input's data comes from."""

    lab: LabSpec
    names: dict[str, Any]
    arrays: dict[str, DeviceArray] = field(default_factory=dict)
    sources: dict[str, Source] = field(default_factory=dict)
    literals: dict[str, Any] = field(default_factory=dict)  # the case's hand-written inputs

    @classmethod
    def allocate(
        cls,
        lab: LabSpec,
        names: dict[str, Any],
        *,
        guards: bool = True,
        literals: Mapping[str, Any] | None = None,
    ) -> DeviceArrays:
        """Fresh arrays with poisoned guards (or none, for the sanitizer's exact allocations).
        `literals` are the case's hand-written inputs (CaseSpec.inputs)."""
        import cupy as cp

        out = cls(lab, dict(names), literals=dict(literals or {}))
        for param in lab.params:
            if not param.is_array:
                continue
            dtype = np.dtype(DTYPES[param.dtype])
            shape = param.shape_for(names)
            nbytes = math.prod(shape) * dtype.itemsize
            guard = guard_bytes(shape, dtype.itemsize) if guards else 0
            raw = cp.empty(guard + nbytes + guard, dtype=cp.uint8)
            view = cp.ndarray(shape, dtype=dtype, memptr=raw.data + guard)
            literal = out.literals.get(param.name)
            data = None if literal is None else literal_array(param, literal, shape)
            bits = compare.guard_value(dtype, _taken_range(param, names, data))
            arr = DeviceArray(param, dtype, shape, raw, view, guard, bits)
            if guard:
                unsigned = _unsigned(dtype)
                raw[:guard].view(unsigned).fill(bits)
                raw[guard + nbytes :].view(unsigned).fill(bits)
            out.arrays[param.name] = arr
        return out

    def generate(self, seed: int, *, nonce: int = 0, rep: int = -1) -> None:
        """Write every input's data: the case's own (rep -1), or a timed repetition's."""
        sources = input_sources(
            self.lab.params, self.names, seed, literals=self.literals, nonce=nonce, rep=rep
        )
        self.fill_from(sources)

    def fill_from(self, sources: Mapping[str, Source]) -> None:
        """Before a launch: every input (and scratch array with an init) gets its data from its
        source, outputs and the other scratch arrays the sentinel."""
        self.sources = dict(sources)
        for arr in self.arrays.values():
            source = self.sources.get(arr.name)
            if source is not None:
                self._write(arr.view, arr.param, source)
            elif arr.kind in ("out", "scratch"):
                arr.view.view(_unsigned(arr.dtype)).fill(_sentinel_bits(arr.dtype))

    def _write(self, target: Any, param: ParamSpec, source: Source) -> None:
        if isinstance(source, np.ndarray):
            target.set(source)
        else:
            device_fill(target, init_of(param), self.names, source, dtype=param.dtype)

    def fresh_input(self, name: str) -> Any:
        """A new device array holding the input's original data, made again from its source."""
        import cupy as cp

        arr = self.arrays[name]
        fresh = cp.empty(arr.shape, dtype=arr.dtype)
        self._write(fresh, arr.param, self.sources[name])
        return fresh

    def host_input(self, name: str) -> np.ndarray:
        """The input's original data on the host (for a Python oracle), made again."""
        source = self.sources[name]
        if isinstance(source, np.ndarray):
            return source.copy()
        fresh = self.fresh_input(name)
        try:
            return np.asarray(fresh.get())
        finally:
            fresh.fill(0)

    def guard_violations(self) -> list[str]:
        """Sentences naming each array whose guard bands were written."""
        import cupy as cp

        found = []
        for arr in self.arrays.values():
            if not arr.guard:
                continue
            unsigned = _unsigned(arr.dtype)
            before = arr.raw[: arr.guard].view(unsigned) != arr.guard_bits
            after = arr.raw[arr.guard + arr.nbytes :].view(unsigned) != arr.guard_bits
            if bool(after.any()):
                elem = arr.view.size + int(cp.flatnonzero(after)[0])
                found.append(
                    f"The kernel wrote past the end of {arr.name}: {arr.name} has "
                    f"{arr.view.size} elements, and element {elem} was written. Check the bounds "
                    "before every store."
                )
            elif bool(before.any()):
                back = before.size - int(cp.flatnonzero(before)[-1])
                found.append(
                    f"The kernel wrote before the start of {arr.name} (about {back} elements "
                    "before index 0): a negative index."
                )
        return found

    def modified_inputs(self) -> list[str]:
        """Names of the read-only inputs whose data differs from what they were given."""
        changed = []
        for arr in self.arrays.values():
            if arr.kind != "in" or arr.name not in self.sources:
                continue
            fresh = self.fresh_input(arr.name)
            unsigned = _unsigned(arr.dtype)
            if bool((arr.view.view(unsigned) != fresh.view(unsigned)).any()):
                changed.append(arr.name)
            del fresh
        return changed

    def host(self, name: str) -> np.ndarray:
        return np.asarray(self.arrays[name].view.get())

    def release(self) -> None:
        self.arrays.clear()
