"""One case's arrays on the device: generated inputs, sentinel-filled outputs, poisoned guards.

Every array the kernel gets is an allocation of its own (cudaMalloc, not CuPy's pool) with a
guard band after it and a spacer allocation before it. The guards and spacers hold a poison value
of the array's dtype (NaN for floats), so a read past an input spoils the answer rather than
adding a harmless tiny number, and a write into them is seen afterwards. A guard covers 33 rows
of a matrix (at least `TAIL_GUARD_BYTES`): a tile loop that reads a whole tile past the last row
stays inside it.

The same layout, told apart only by what the guards are: compute-sanitizer runs its case with
`--padding TAIL_GUARD_BYTES`, which puts that many bytes of memory it treats as out of bounds
after every allocation, and `guards=False` allocates each array and spacer without its tail; so
under the sanitizer the arrays lie exactly as far apart as in a graded run of the same sizes, and
a read past an array's end is reported there instead of reading poison. Which array comes first
and how large each spacer is are drawn at random for every allocation, in both runs alike: a
kernel cannot recognise the run it is in from where its arrays lie (graders/run/layout.py).

Inputs are never kept in a second device copy while a student's kernel runs (it could find and
change that copy too): to check that an input is unchanged, or to compute the expected answer,
the generator makes the input again from its key (a hand-written input is uploaded again from
the child's host memory, which no kernel reaches).

Scratch arrays with an `init` get that data before every run (timed repetitions too); outputs,
and scratch arrays without one, get the sentinel.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graders.run import compare
from graders.run.generate import device_fill
from graders.run.inputs import DTYPES, Source, init_of, input_sources, literal_array
from graders.run.layout import TAIL_GUARD_BYTES, Layout
from graders.run.normal import STD_REACH
from graders.spec import LabSpec, ParamSpec, expr

MIN_GUARD_BYTES = TAIL_GUARD_BYTES
MAX_GUARD_BYTES = 256 * 1024 * 1024
GUARD_ROWS = 33


def guard_bytes(shape: tuple[int, ...], itemsize: int) -> int:
    """Room for 33 rows of a matrix (a tile of rows past the end), at least the sanitizer's
    padding (so that small cases, the sanitizer's among them, lie as they do under it)."""
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
    raw: Any  # cupy uint8 array over the allocation: data, then the tail guard
    view: Any  # cupy array of dtype and shape over the data
    guard: int  # bytes of the tail guard (0: none, the sanitizer's run)
    guard_bits: Any  # the poison, as an unsigned integer of the dtype's width
    spacer: Any = None  # cupy uint8 array over the spacer allocated just before it

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


@dataclass(frozen=True)
class Slot:
    """One array of a case as it is allocated: the spacer just before it, then its data and
    its tail guard."""

    param: ParamSpec
    dtype: np.dtype
    shape: tuple[int, ...]
    nbytes: int
    guard: int  # bytes of poisoned tail after the data (0: none, the sanitizer's run)
    spacer: int  # bytes of the spacer allocation before it
    guard_bits: Any  # the poison, as an unsigned integer of the dtype's width


def allocation_plan(
    lab: LabSpec,
    names: Mapping[str, Any],
    *,
    guards: bool,
    literals: Mapping[str, Any] | None = None,
    layout: Layout | None = None,
) -> list[Slot]:
    """A case's arrays in the order they are allocated, with their spacers: drawn from
    `layout` (fresh by default). The graded run (DeviceArrays.allocate) and the sanitizer's
    launcher (graders.sanitizer.job) both allocate from this, so they lie out alike."""
    layout = layout or Layout.fresh()
    params = [p for p in lab.params if p.is_array]
    plan = []
    for index in layout.order(len(params)):
        param = params[index]
        dtype = np.dtype(DTYPES[param.dtype])
        shape = param.shape_for(dict(names))
        nbytes = math.prod(shape) * dtype.itemsize
        guard = guard_bytes(shape, dtype.itemsize) if guards else 0
        literal = (literals or {}).get(param.name)
        data = None if literal is None else literal_array(param, literal, shape)
        bits = compare.guard_value(dtype, _taken_range(param, dict(names), data))
        spacer = layout.spacer() + (TAIL_GUARD_BYTES if guards else 0)
        plan.append(Slot(param, dtype, shape, nbytes, guard, spacer, bits))
    return plan


def sentinel_bits(dtype: np.dtype) -> Any:
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
        layout: Layout | None = None,
    ) -> DeviceArrays:
        """Fresh arrays in a random layout, with poisoned guards and spacers; or (guards=False)
        the same layout without the tails, for compute-sanitizer's padded allocations.
        `literals` are the case's hand-written inputs (CaseSpec.inputs)."""
        out = cls(lab, dict(names), literals=dict(literals or {}))
        plan = allocation_plan(lab, names, guards=guards, literals=out.literals, layout=layout)
        for slot in plan:
            # The spacer first, so that it lies just before the array (the driver hands out
            # consecutive allocations side by side); under the sanitizer it is padded too.
            spacer = _device_bytes(slot.spacer)
            raw = _device_bytes(slot.nbytes + slot.guard)
            view = _typed(raw, slot.dtype, slot.shape)
            arr = DeviceArray(
                slot.param, slot.dtype, slot.shape, raw, view, slot.guard, slot.guard_bits, spacer
            )
            if slot.guard:
                unsigned = _unsigned(slot.dtype)
                _poison(raw[slot.nbytes :], unsigned, slot.guard_bits)
                _poison(spacer, unsigned, slot.guard_bits)
            out.arrays[slot.param.name] = arr
        # The lab's order, whatever order they were allocated in.
        out.arrays = {p.name: out.arrays[p.name] for p in lab.params if p.is_array}
        return out

    def generate(self, seed: int, *, nonce: int = 0, rep: int = -1) -> None:
        """Write every input's data: the case's own (rep -1), or a timed repetition's."""
        sources = input_sources(
            self.lab.params, self.names, seed, literals=self.literals, nonce=nonce, rep=rep
        )
        self.fill_from(sources)

    def fill_from(self, sources: Mapping[str, Source], *, copies_only: bool = False) -> None:
        """Before a launch: every input (and scratch array with an init) gets its data from its
        source, outputs and the other scratch arrays the sentinel. `copies_only`: the sentinel
        is made on the host and copied too, so that with sources made on the host (from
        graders.run.inputs.generate_arrays) no kernel runs before the launch (the sanitizer's
        program, graders.sanitizer.target, where every kernel is instrumented)."""
        self.sources = dict(sources)
        for arr in self.arrays.values():
            source = self.sources.get(arr.name)
            if source is not None:
                self._write(arr.view, arr.param, source)
            elif arr.kind in ("out", "scratch"):
                unsigned = _unsigned(arr.dtype)
                if copies_only:
                    bits = np.full(arr.view.shape, sentinel_bits(arr.dtype), dtype=unsigned)
                    arr.view.view(unsigned).set(bits)
                else:
                    arr.view.view(unsigned).fill(sentinel_bits(arr.dtype))

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

    def _guard_masks(self) -> Iterator[tuple[DeviceArray, Any, Any]]:
        """Each guarded array, with where its tail guard and its spacer (None: it has none)
        no longer hold the poison."""
        for arr in self.arrays.values():
            if arr.guard:
                unsigned = _unsigned(arr.dtype)
                after = _unpoisoned(arr.raw[arr.nbytes :], unsigned, arr.guard_bits)
                yield arr, after, _unpoisoned(arr.spacer, unsigned, arr.guard_bits)

    def _input_changes(self) -> Iterator[tuple[DeviceArray, Any]]:
        """Each read-only input, with where it differs, bit by bit, from its data made again."""
        for arr in self.arrays.values():
            if arr.kind == "in" and arr.name in self.sources:
                fresh = self.fresh_input(arr.name)
                unsigned = _unsigned(arr.dtype)
                yield arr, arr.view.view(unsigned) != fresh.view(unsigned)
                del fresh

    def untouched(self, *, inputs: bool = True) -> bool:
        """Whether no guard band was written and (with `inputs`) no input changed: every
        check of `guard_violations` and `modified_inputs` counted on the device, and the
        counts fetched in one copy. Each fetch waits for the GPU, and where another process
        has work on the GPU, the wait lasts until the GPU's time slice comes round to this
        process (2.4 ms a wait beside another process's kernel, 0.012 ms alone, measured on
        an H100); those two check one array at a time, two or three fetches an array. The
        sentences come from them, asked only when this finds something touched."""
        # Counted as each mask is made, so no more than one input's mask is held at a time.
        counts = [_count(m) for _, after, before in self._guard_masks() for m in (after, before)]
        if inputs:
            counts += [_count(changed) for _, changed in self._input_changes()]
        counts = [c for c in counts if c is not None]
        if not counts:
            return True
        xp = compare.array_module(counts[0])
        return int(xp.stack([xp.asarray(c, dtype=xp.int64) for c in counts]).sum()) == 0

    def guard_violations(self) -> list[str]:
        """Sentences naming each array whose guard bands were written."""
        found = []
        for arr, after, before in self._guard_masks():
            xp = compare.array_module(after)
            if bool(after.any()):
                elem = arr.view.size + int(xp.flatnonzero(after)[0])
                found.append(
                    f"The kernel wrote past the end of {arr.name}: {arr.name} has "
                    f"{arr.view.size} elements, and element {elem} was written. Check the bounds "
                    "before every store."
                )
            elif before is not None and bool(before.any()):
                back = before.size - int(xp.flatnonzero(before)[-1])
                found.append(
                    f"The kernel wrote before the start of {arr.name} (about {back} elements "
                    "before index 0): a negative index."
                )
        return found

    def modified_inputs(self) -> list[str]:
        """Names of the read-only inputs whose data differs from what they were given."""
        return [arr.name for arr, changed in self._input_changes() if bool(changed.any())]

    def host(self, name: str) -> np.ndarray:
        return np.asarray(self.arrays[name].view.get())

    def nbytes_on_device(self) -> int:
        """Bytes these arrays hold on the device, guards and spacers included."""
        return sum(
            a.raw.nbytes + (a.spacer.nbytes if a.spacer is not None else 0)
            for a in self.arrays.values()
        )

    def release(self) -> None:
        self.arrays.clear()


def _device_bytes(nbytes: int) -> Any:
    """A uint8 array over an allocation of its own (cudaMalloc, never a pooled block)."""
    import cupy as cp

    memory = cp.cuda.Memory(max(nbytes, 0))
    return cp.ndarray((nbytes,), dtype=cp.uint8, memptr=cp.cuda.MemoryPointer(memory, 0))


def _typed(raw: Any, dtype: np.dtype, shape: tuple[int, ...]) -> Any:
    import cupy as cp

    return cp.ndarray(shape, dtype=dtype, memptr=raw.data)


def _poison(region: Any, unsigned: np.dtype, bits: Any) -> None:
    """Fill a byte region with the poison; a tail not a whole number of elements gets 0xA5."""
    whole = region.size - region.size % unsigned.itemsize
    if whole:
        region[:whole].view(unsigned).fill(bits)
    if whole < region.size:
        region[whole:].fill(0xA5)


def _count(mask: Any) -> Any:
    """How many of `mask` are set, left on the device (None for no mask)."""
    return None if mask is None else compare.array_module(mask).count_nonzero(mask)


def _unpoisoned(region: Any, unsigned: np.dtype, bits: Any) -> Any:
    """Where a poisoned region no longer holds the poison (whole elements only)."""
    if region is None:
        return None
    whole = region.size - region.size % unsigned.itemsize
    return region[:whole].view(unsigned) != bits
