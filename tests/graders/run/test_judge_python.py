"""The trusted answer from a lab's oracle.py, made by judge on NumPy arrays: the inputs made
again on the host, the scalars as Python numbers, output shapes by the submission's
declarations, and each compared answer placed where its output lives (CuPy on a GPU)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graders.run import python_oracle
from graders.run.buffers import DeviceArray, DeviceArrays
from graders.run.context import Context, Kernel
from graders.run.judge import Answers, expected_answers
from graders.spec import LabSpec, load_lab
from tests.graders.spec_samples import MULTI_SPEC, write_multi_lab

RECORDING = """\
import numpy as np

seen = {}


def expected(inputs, sizes, scalars):
    seen.update(inputs=inputs, sizes=sizes, scalars=scalars)
    counts = np.bincount(inputs["data"], minlength=256)
    return {"out": counts * scalars["alpha"]}
"""


def _lab(tmp_path: Path, spec: str = MULTI_SPEC, oracle: str = RECORDING) -> LabSpec:
    return load_lab(write_multi_lab(tmp_path, spec, oracle))


def _arrays(lab: LabSpec, case: str, data: np.ndarray, declared: dict[str, int]) -> DeviceArrays:
    """The case's arrays in NumPy, the input's data from a host source as a literal input's."""
    names = lab.sizes_for(case, declared)
    arrays = DeviceArrays(lab, names)
    for p in lab.params:
        if not p.is_array:
            continue
        dtype = np.dtype(np.float32 if p.dtype == "float32" else p.dtype)
        view = np.full(p.shape_for(names), 7, dtype)
        arrays.arrays[p.name] = DeviceArray(p, dtype, view.shape, view.view(np.uint8), view, 0, 0)
    arrays.sources["data"] = data
    return arrays


def _answers(lab: LabSpec, case: str, arrays: DeviceArrays, alpha: float) -> Answers:
    ctx = Context(lab, Kernel("submission", {}, {}), {}, 0)
    scalars = {"n": np.uint64(arrays.names["n"]), "alpha": np.float32(alpha)}
    return expected_answers(ctx, lab.case(case), arrays, scalars)


def test_the_answer_comes_from_the_inputs_made_again_and_the_cases_scalars(
    tmp_path: Path,
) -> None:
    lab = _lab(tmp_path)
    data = np.array([1, 2, 3, 255, 255], np.uint8)
    arrays = _arrays(lab, "tiny", data, {})
    arrays.arrays["data"].view[:] = 0  # what the kernel left in the input is never read
    answers = _answers(lab, "tiny", arrays, 0.5)
    assert set(answers.device) == {"out"}  # the scratch array and the input get no answer
    out = answers.device["out"]
    assert isinstance(out, np.ndarray) and out.dtype == np.float64 and out.shape == (256,)
    assert out[1] == out[2] == out[3] == 0.5 and out[255] == 1.0 and out.sum() == 2.5
    assert np.array_equal(answers.host["out"], out)
    assert set(answers.inputs) == {"data"}
    assert np.array_equal(answers.inputs["data"], data)
    assert not answers.inputs["data"].flags.writeable
    assert answers.inputs["data"] is not data  # a copy: the oracle cannot reach the source
    seen = python_oracle.load(lab).seen
    assert seen["sizes"] == {"n": 5, "spread": 1.0, "alpha": 0.5}
    assert seen["scalars"] == {"n": 5, "alpha": 0.5}
    assert isinstance(seen["scalars"]["n"], int) and isinstance(seen["scalars"]["alpha"], float)
    assert np.array_equal(seen["inputs"]["data"], data)


def test_the_answer_is_released_from_where_it_was_placed(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    arrays = _arrays(lab, "tiny", np.array([4, 4, 4, 4, 4], np.uint8), {})
    answers = _answers(lab, "tiny", arrays, -2.0)
    out = answers.device["out"]
    assert out[4] == -10.0
    answers.release()
    assert not out.any() and answers.device == {}


SHAPED_BY_BLOCK = MULTI_SPEC.replace(
    'name = "out"\nkind = "out"\ndtype = "float32"\nshape = [256]',
    'name = "out"\nkind = "out"\ndtype = "float32"\nshape = ["BLOCK"]',
)

BLOCK_ORACLE = """\
import numpy as np


def expected(inputs, sizes, scalars):
    return {"out": np.full(128, scalars["alpha"])}
"""


@pytest.mark.parametrize(("declared", "fits"), [({"BLOCK_SIZE": 128}, True), ({}, False)])
def test_an_outputs_shape_follows_the_submissions_declarations(
    tmp_path: Path, declared: dict[str, int], fits: bool
) -> None:
    assert SHAPED_BY_BLOCK != MULTI_SPEC
    lab = _lab(tmp_path, SHAPED_BY_BLOCK, BLOCK_ORACLE)
    # the submission's declaration by the lab's name for it, as the compile stage reports it
    by_lab_name = {"BLOCK": declared["BLOCK_SIZE"]} if declared else {}
    arrays = _arrays(lab, "tiny", np.zeros(5, np.uint8), by_lab_name)
    if fits:
        answers = _answers(lab, "tiny", arrays, 3.0)
        assert answers.device["out"].shape == (128,) and answers.device["out"][127] == 3.0
    else:  # the lab's default (256) is not what this oracle answers
        with pytest.raises(
            python_oracle.OracleCodeError, match=r"shape \[128\]; out has shape \[256\]"
        ):
            _answers(lab, "tiny", arrays, 3.0)
