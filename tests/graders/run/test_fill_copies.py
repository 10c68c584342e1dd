"""The sanitizer's programs fill a case's arrays with copies only (graders.sanitizer.target):
the same bytes as the normal run's fill, for every built-in lab's sanitizer case. Here the
"device" arrays are NumPy arrays that answer `set` as CuPy's do."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from graders.run.buffers import DeviceArray, DeviceArrays
from graders.run.host_dtypes import host_dtype
from graders.run.inputs import generate_arrays
from graders.sanitizer.stage import sanitizer_case
from graders.spec import list_builtin_labs, load_builtin_lab


class _Device(np.ndarray):
    """A host array with CuPy's `set` (a copy from the host into it)."""

    def set(self, values: np.ndarray) -> None:
        assert values.dtype == self.dtype and values.shape == self.shape
        self[...] = values


def _arrays(lab_id: str) -> tuple[DeviceArrays, dict[str, Any]]:
    lab = load_builtin_lab(lab_id)
    case = lab.case(sanitizer_case(lab))
    names = lab.sizes_for(case, {})
    arrays = DeviceArrays(lab, names, literals=dict(case.inputs or {}))
    for p in lab.params:
        if not p.is_array:
            continue
        dtype = host_dtype(p.dtype)
        view = np.zeros(p.shape_for(names), dtype).view(_Device)
        view.view(np.uint8)[...] = 0x5A  # what a fresh allocation may hold
        arrays.arrays[p.name] = DeviceArray(p, dtype, view.shape, view.view(np.uint8), view, 0, 0)
    data = generate_arrays(lab.params, names, 1234567, literals=case.inputs)
    return arrays, data


@pytest.mark.parametrize("lab_id", list_builtin_labs())
def test_copies_only_fill_the_same_bytes_as_the_normal_fill(lab_id: str) -> None:
    normal, data = _arrays(lab_id)
    copies, _ = _arrays(lab_id)
    normal.fill_from(data)
    copies.fill_from(data, copies_only=True)
    for name, arr in normal.arrays.items():
        got = copies.arrays[name].view.view(np.uint8)
        assert np.array_equal(got, arr.view.view(np.uint8)), (lab_id, name)
        assert not np.all(got == 0x5A), (lab_id, name)  # every array was written
        if name in data:
            assert np.array_equal(got, np.ascontiguousarray(data[name]).view(np.uint8))
