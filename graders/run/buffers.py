"""One case's arrays on the device: generated inputs, sentinel-filled outputs, poisoned guards.

Every array the kernel gets lives inside a larger allocation with a guard band before and after
it. The guards hold a poison value of the array's dtype (NaN for floats), so a read past an
input spoils the answer rather than adding a harmless tiny number, and a write into them is
seen afterwards. A guard covers 33 rows of a matrix (at least 64 KiB): a tile loop that reads
a whole tile past the last row stays inside it.

Inputs are never kept in a second device copy while a student's kernel runs (it could find and
change that copy too): to check that an input is unchanged, or to compute the expected answer,
the generator makes the input again from its key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graders.run import compare
from graders.run.generate import device_fill, stream_key
from graders.run.inputs import DTYPES, init_of, input_params
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


def _taken_range(param: ParamSpec, names: dict[str, Any]) -> tuple[float, float] | None:
    """The values an input's data can take, so an integer guard can lie outside them."""
    init = param.init
    if init is None:
        return None
    if init.dist == "constant":
        value = float(expr.evaluate(init.value, names))
        return value, value
    return float(expr.evaluate(init.low, names)), float(expr.evaluate(init.high, names))


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
    """All of one case's arrays on the device, and the generator keys of its inputs."""

    lab: LabSpec
    names: dict[str, Any]
    arrays: dict[str, DeviceArray] = field(default_factory=dict)
    keys: dict[str, int] = field(default_factory=dict)

    @classmethod
    def allocate(cls, lab: LabSpec, names: dict[str, Any], *, guards: bool = True) -> DeviceArrays:
        """Fresh arrays with poisoned guards (or none, for the sanitizer's exact allocations)."""
        import cupy as cp

        out = cls(lab, dict(names))
        for param in lab.params:
            if not param.is_array:
                continue
            dtype = np.dtype(DTYPES[param.dtype])
            shape = param.shape_for(names)
            nbytes = math.prod(shape) * dtype.itemsize
            guard = guard_bytes(shape, dtype.itemsize) if guards else 0
            raw = cp.empty(guard + nbytes + guard, dtype=cp.uint8)
            view = cp.ndarray(shape, dtype=dtype, memptr=raw.data + guard)
            bits = compare.guard_value(dtype, _taken_range(param, names))
            arr = DeviceArray(param, dtype, shape, raw, view, guard, bits)
            if guard:
                unsigned = _unsigned(dtype)
                raw[:guard].view(unsigned).fill(bits)
                raw[guard + nbytes :].view(unsigned).fill(bits)
            out.arrays[param.name] = arr
        return out

    def generate(self, seed: int, *, nonce: int = 0, rep: int = -1) -> None:
        """Write every input's data: the case's own (rep -1), or a timed repetition's."""
        keys = {
            p.name: stream_key(seed, p.name, nonce=nonce, rep=rep)
            for p in input_params(self.lab.params)
        }
        self.fill_from(keys)

    def fill_from(self, keys: dict[str, int]) -> None:
        """Write every input's data from the generator keys given, then prepare the outputs."""
        self.keys = dict(keys)
        for param in input_params(self.lab.params):
            device_fill(self.arrays[param.name].view, init_of(param), self.names, keys[param.name])
        self.prepare()

    def prepare(self) -> None:
        """Before a launch: outputs and scratch get the sentinel, in-out arrays their data."""
        for arr in self.arrays.values():
            if arr.kind == "inout" and arr.name in self.keys:
                device_fill(arr.view, init_of(arr.param), self.names, self.keys[arr.name])
            elif arr.kind in ("out", "scratch"):
                arr.view.view(_unsigned(arr.dtype)).fill(_sentinel_bits(arr.dtype))

    def fresh_input(self, name: str) -> Any:
        """A new device array holding the input's original data, made again from its key."""
        import cupy as cp

        arr = self.arrays[name]
        fresh = cp.empty(arr.shape, dtype=arr.dtype)
        device_fill(fresh, init_of(arr.param), self.names, self.keys[name])
        return fresh

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
        """Names of the read-only inputs whose data differs from what the generator made."""
        changed = []
        for arr in self.arrays.values():
            if arr.kind != "in" or arr.name not in self.keys:
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
