"""DeviceArrays.untouched: every guard band, spacer and input counted at once, on NumPy arrays
laid out as a graded run lays them out (the device's own run is in tests/graders/gpu)."""

from __future__ import annotations

import numpy as np
import pytest

from graders.run import compare
from graders.run.buffers import DeviceArray, DeviceArrays, _poison, _unsigned, guard_bytes
from graders.spec import load_builtin_lab

N = 1000


def _guarded(arrays: DeviceArrays, name: str, data: np.ndarray) -> DeviceArray:
    param = arrays.lab.param(name)
    guard = guard_bytes(data.shape, data.dtype.itemsize)
    raw = np.zeros(data.nbytes + guard, dtype=np.uint8)
    view = raw[: data.nbytes].view(data.dtype).reshape(data.shape)
    view[...] = data
    bits = compare.guard_value(data.dtype)
    spacer = np.zeros(96, dtype=np.uint8)
    _poison(raw[data.nbytes :], _unsigned(data.dtype), bits)
    _poison(spacer, _unsigned(data.dtype), bits)
    return DeviceArray(param, data.dtype, data.shape, raw, view, guard, bits, spacer)


@pytest.fixture
def arrays() -> DeviceArrays:
    """vector-scale's n-1000 after a right run: src as given, dst written, guards intact."""
    lab = load_builtin_lab("vector-scale")
    out = DeviceArrays(lab, lab.sizes_for("n-1000"))
    src = np.linspace(-1.0, 1.0, N, dtype=np.float32)
    out.arrays = {"src": _guarded(out, "src", src), "dst": _guarded(out, "dst", 2.5 * src)}
    out.sources = {"src": src.copy()}
    out.fresh_input = lambda name: out.sources[name].copy()  # type: ignore[method-assign]
    return out


def test_a_clean_run_is_untouched(arrays: DeviceArrays) -> None:
    assert arrays.untouched() and arrays.untouched(inputs=False)
    assert arrays.guard_violations() == [] and arrays.modified_inputs() == []


@pytest.mark.parametrize("where", ["tail", "spacer"])
@pytest.mark.parametrize("name", ["src", "dst"])
def test_one_byte_in_any_guard_or_spacer_is_found(
    arrays: DeviceArrays, name: str, where: str
) -> None:
    arr = arrays.arrays[name]
    region = arr.raw[arr.nbytes :] if where == "tail" else arr.spacer
    index = 0 if where == "tail" else region.size - 4  # just past the end, or just before 0
    region[index] ^= 1
    assert not arrays.untouched() and not arrays.untouched(inputs=False)
    assert len(arrays.guard_violations()) == 1
    region[index] ^= 1
    assert arrays.untouched()


def test_the_last_whole_guard_element_counts(arrays: DeviceArrays) -> None:
    arr = arrays.arrays["dst"]
    whole = arr.guard - arr.guard % 4
    arr.raw[arr.nbytes + whole - 1] ^= 0x80
    assert not arrays.untouched()


def test_a_changed_input_is_found_only_where_inputs_are_checked(arrays: DeviceArrays) -> None:
    arrays.arrays["src"].view[N - 1] = 7.0
    assert not arrays.untouched()
    assert arrays.untouched(inputs=False)  # a timed repetition's check leaves inputs alone
    assert arrays.modified_inputs() == ["src"]
    arrays.arrays["src"].view[N - 1] = arrays.sources["src"][N - 1]
    arrays.arrays["dst"].view[0] = 99.0  # an output may change: it is the output
    assert arrays.untouched()


def test_a_negative_zero_in_an_input_is_a_change(arrays: DeviceArrays) -> None:
    """Compared bit by bit, as modified_inputs compares: -0.0 == 0.0 would hide it."""
    arrays.sources["src"][0] = 0.0
    arrays.arrays["src"].view[0] = -0.0
    assert not arrays.untouched()
    assert arrays.modified_inputs() == ["src"]


def test_arrays_without_guards_and_no_inputs_are_untouched() -> None:
    lab = load_builtin_lab("vector-scale")
    bare = DeviceArrays(lab, lab.sizes_for("n-1000"))
    assert bare.untouched()


def test_only_inputs_are_compared_with_their_data_made_again(arrays: DeviceArrays) -> None:
    """A scratch array with an `init` has a source too, and the kernel may write it; here the
    output stands in for one."""
    arrays.sources["dst"] = arrays.arrays["dst"].view.copy()
    arrays.arrays["dst"].view[0] = 99.0
    assert arrays.untouched()
    assert arrays.modified_inputs() == []
