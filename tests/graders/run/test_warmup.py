"""Which array types a grading's child warms when it starts (no GPU needed): those of its
lab's parameters that no spare warmed ahead; the warm-up itself runs on a GPU host
(tests/graders/gpu/test_prestart_gpu.py, tests/app/grading/test_worker_gpu.py)."""

from __future__ import annotations

from graders.run.warmup import AHEAD, lab_dtypes
from graders.spec import list_builtin_labs, load_builtin_lab
from graders.spec.dtypes import ARRAY_DTYPES


def test_a_float32_lab_needs_nothing_beyond_the_spares_warm_up() -> None:
    assert AHEAD == ("float32",)
    assert lab_dtypes(load_builtin_lab("matmul-tiled")) == []
    assert lab_dtypes(load_builtin_lab("vector-scale")) == []


def test_other_types_are_warmed_at_the_start_of_their_labs_grading() -> None:
    assert lab_dtypes(load_builtin_lab("matmul-tiled-f64")) == ["float64"]
    assert lab_dtypes(load_builtin_lab("matmul-tiled-int")) == ["int32"]
    assert lab_dtypes(load_builtin_lab("histogram")) == ["uint32", "uint8"]  # ARRAY_DTYPES order


def test_every_labs_array_types_are_warmed_ahead_or_at_its_start() -> None:
    for lab_id in list_builtin_labs():
        lab = load_builtin_lab(lab_id)
        used = {p.dtype for p in lab.params if p.is_array}
        assert used <= set(AHEAD) | set(lab_dtypes(lab)), lab_id
        assert set(lab_dtypes(lab)) <= set(ARRAY_DTYPES) - set(AHEAD), lab_id
