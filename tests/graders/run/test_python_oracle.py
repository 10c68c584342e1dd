"""The Python oracle, called with NumPy on the CPU as the run stage will call it in the child."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graders.run import python_oracle
from graders.run.host_dtypes import bfloat16_bits
from graders.run.python_oracle import OracleCodeError
from graders.spec import LabSpec, load_lab
from tests.graders.spec_samples import MULTI_SPEC, write_multi_lab


def _lab(tmp_path: Path, oracle: str, spec: str = MULTI_SPEC) -> LabSpec:
    return load_lab(write_multi_lab(tmp_path, spec, oracle))


def _inputs(lab: LabSpec, data: list[int]) -> dict[str, np.ndarray]:
    return python_oracle.oracle_inputs(lab, {"data": np.array(data, np.uint8)})


def test_expected_gets_inputs_sizes_and_scalars_and_answers_in_float64(tmp_path: Path) -> None:
    oracle = (
        "import numpy as np\n"
        "seen = {}\n"
        "def expected(inputs, sizes, scalars):\n"
        "    seen.update(inputs=inputs, sizes=sizes, scalars=scalars)\n"
        "    counts = np.bincount(inputs['data'], minlength=256)\n"
        "    return {'out': counts * np.float32(scalars['alpha'])}\n"
    )
    lab = _lab(tmp_path, oracle)
    case = lab.case("tiny")
    inputs = _inputs(lab, [1, 2, 3, 255, 255])
    scalars = python_oracle.oracle_scalars(lab, {"n": np.uint64(5), "alpha": np.float32(0.5)})
    assert scalars == {"n": 5, "alpha": 0.5} and isinstance(scalars["n"], int)
    answer = python_oracle.expected_outputs(lab, case, inputs, scalars)
    assert set(answer) == {"out"} and answer["out"].dtype == np.float64
    assert answer["out"].shape == (256,) and answer["out"][255] == 1.0
    module = python_oracle.load(lab)
    assert module.seen["sizes"] == {"n": 5, "spread": 1.0, "alpha": 0.5}
    assert module.seen["inputs"]["data"].dtype == np.uint8
    assert not module.seen["inputs"]["data"].flags.writeable  # the oracle cannot change inputs


def test_a_bare_array_answers_the_only_output(tmp_path: Path) -> None:
    oracle = "import numpy as np\ndef expected(i, s, c):\n    return np.zeros(256)\n"
    lab = _lab(tmp_path, oracle)
    answer = python_oracle.expected_outputs(lab, lab.case("tiny"), _inputs(lab, [0] * 5), {})
    assert answer["out"].shape == (256,)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("return {'out': np.zeros(255)}", "shape [255]; out has shape [256]"),
        ("return {'out': np.zeros((16, 16))}", "shape [16, 16]; out has shape [256]"),
        ("return {'outs': np.zeros(256)}", "'outs', which is not an output"),
        ("return {}", "no answer for the output 'out'"),
        ("return [np.zeros(256), 1]", "not an array"),
        ("return {'out': np.array(['a'] * 256)}", "an array of <U1"),
        ("return 1 / 0", "(oracle.py line 3, in expected): ZeroDivisionError"),
    ],
)
def test_a_bad_answer_names_the_oracle_and_what_is_wrong(
    tmp_path: Path, body: str, fragment: str
) -> None:
    oracle = f"import numpy as np\ndef expected(inputs, sizes, scalars):\n    {body}\n"
    lab = _lab(tmp_path, oracle)
    with pytest.raises(OracleCodeError) as info:
        python_oracle.expected_outputs(lab, lab.case("tiny"), _inputs(lab, [0] * 5), {})
    assert fragment in str(info.value)


def test_an_oracle_that_fails_to_load_is_named(tmp_path: Path) -> None:
    lab = _lab(tmp_path, "import no_such_module_here\ndef expected(i, s, c):\n    pass\n")
    with pytest.raises(
        OracleCodeError, match=r"\(oracle.py line 1, in <module>\): ModuleNotFoundError"
    ):
        python_oracle.load(lab)


INT_SPEC = MULTI_SPEC.replace(
    'name = "out"\nkind = "out"\ndtype = "float32"', 'name = "out"\nkind = "out"\ndtype = "uint32"'
)


def test_integer_outputs_need_integer_answers(tmp_path: Path) -> None:
    floats = "import numpy as np\ndef expected(i, s, c):\n    return np.zeros(256)\n"
    lab = _lab(tmp_path / "a", floats, INT_SPEC)
    with pytest.raises(OracleCodeError, match="return integers"):
        python_oracle.expected_outputs(lab, lab.case("tiny"), _inputs(lab, [0] * 5), {})
    ints = (
        "import numpy as np\n"
        "def expected(i, s, c):\n"
        "    return np.bincount(i['data'], minlength=256)\n"
    )
    lab = _lab(tmp_path / "b", ints, INT_SPEC)
    answer = python_oracle.expected_outputs(lab, lab.case("tiny"), _inputs(lab, [7] * 5), {})
    assert answer["out"].dtype == np.int64 and answer["out"][7] == 5


def test_a_sum_answer_is_one_number(tmp_path: Path) -> None:
    spec = MULTI_SPEC.replace(
        'shape = [256]\n\n[[params]]\nname = "n"',
        'shape = [256]\ncheck = "sum"\n\n[[params]]\nname = "n"',
    )
    lab = _lab(tmp_path / "a", "def expected(i, s, c):\n    return {'out': 12.5}\n", spec)
    answer = python_oracle.expected_outputs(lab, lab.case("tiny"), _inputs(lab, [0] * 5), {})
    assert answer["out"].tolist() == [12.5]
    lab = _lab(tmp_path / "b", "def expected(i, s, c):\n    return {'out': [1, 2]}\n", spec)
    with pytest.raises(OracleCodeError, match="its check is 'sum', so return the one total"):
        python_oracle.expected_outputs(lab, lab.case("tiny"), _inputs(lab, [0] * 5), {})


CHECKED = (
    "import numpy as np\n"
    "def expected(inputs, sizes, scalars):\n"
    "    return {'out': np.zeros(256)}\n"
    "def check(outputs, expected, inputs, sizes):\n"
    "    total = float(outputs['out'].sum())\n"
    "    if total > 10:\n"
    "        return False, f'out adds up to {total:g}, more than the {sizes[\"n\"]} inputs'\n"
    "    return total >= 0\n"
)


def test_check_gets_outputs_and_returns_a_verdict_with_a_message(tmp_path: Path) -> None:
    lab = _lab(tmp_path, CHECKED)
    case = lab.case("tiny")
    inputs = _inputs(lab, [0] * 5)
    answer = python_oracle.expected_outputs(lab, case, inputs, {})
    good = python_oracle.run_check(
        lab, case, {"out": np.ones(256, np.float32) / 256}, answer, inputs
    )
    assert good.passed and good.message == "The lab's check passed."
    bad = python_oracle.run_check(lab, case, {"out": np.ones(256, np.float32)}, answer, inputs)
    assert not bad.passed and bad.message == "out adds up to 256, more than the 5 inputs"
    negative = python_oracle.run_check(
        lab, case, {"out": -np.ones(256, np.float32)}, answer, inputs
    )
    assert not negative.passed and "failed" in negative.message


@pytest.mark.parametrize(
    ("ret", "fragment"),
    [("'yes'", "check() returned 'yes'"), ("None", "returned None"), ("1 / 0", "line 5, in check")],
)
def test_a_bad_check_is_the_labs_fault(tmp_path: Path, ret: str, fragment: str) -> None:
    oracle = CHECKED.split("def check")[0] + f"def check(o, e, i, s):\n    return {ret}\n"
    lab = _lab(tmp_path, oracle)
    case = lab.case("tiny")
    with pytest.raises(OracleCodeError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        python_oracle.run_check(lab, case, {"out": np.zeros(256, np.float32)}, {}, {})


def test_bfloat16_data_reaches_the_oracle_as_float32_values(tmp_path: Path) -> None:
    spec = MULTI_SPEC.replace(
        'name = "data"\nkind = "in"\ndtype = "uint8"',
        'name = "data"\nkind = "in"\ndtype = "bfloat16"',
    ).replace("inputs = { data = [1, 2, 3, 255, 0] }", "inputs = { data = [1.5, 2, 3, 255, 0] }")
    oracle = (
        "import numpy as np\n"
        "def expected(inputs, sizes, scalars):\n"
        "    assert inputs['data'].dtype == np.float32, inputs['data'].dtype\n"
        "    out = np.zeros(256)\n"
        "    out[:5] = inputs['data']\n"
        "    return out\n"
    )
    lab = _lab(tmp_path, oracle, spec)
    bits = bfloat16_bits(np.array([1.5, 2, 3, 255, 0], np.float32))
    inputs = python_oracle.oracle_inputs(lab, {"data": bits})
    answer = python_oracle.expected_outputs(lab, lab.case("tiny"), inputs, {})
    assert answer["out"][:5].tolist() == [1.5, 2, 3, 255, 0]


def test_cupy_answers_are_brought_to_the_host(tmp_path: Path) -> None:
    """An oracle may compute with CuPy; the answer is copied back (a stand-in type here)."""
    oracle = (
        "import numpy as np\n"
        "class DeviceArray:\n"
        "    __cuda_array_interface__ = {}\n"
        "    def get(self):\n"
        "        return np.full(256, 2.0)\n"
        "def expected(i, s, c):\n"
        "    return {'out': DeviceArray()}\n"
    )
    lab = _lab(tmp_path, oracle)
    answer = python_oracle.expected_outputs(lab, lab.case("tiny"), _inputs(lab, [0] * 5), {})
    assert answer["out"].tolist() == [2.0] * 256
