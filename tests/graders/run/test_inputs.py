"""Seeded inputs: reproducible, independent per parameter, hidden cases keyed by the secret."""

from __future__ import annotations

import numpy as np
import pytest

from graders.run import inputs
from graders.spec import InitSpec, ParamSpec


def test_visible_seed_depends_only_on_lab_and_case() -> None:
    a = inputs.case_seed("matmul-tiled", "square-1023", hidden=False)
    assert a == inputs.case_seed("matmul-tiled", "square-1023", hidden=False, secret="x")
    assert a != inputs.case_seed("matmul-tiled", "square-1024", hidden=False)
    assert a != inputs.case_seed("matmul-naive", "square-1023", hidden=False)
    assert 0 <= a < 2**63


def test_hidden_seed_depends_on_the_secret() -> None:
    one = inputs.case_seed("lab", "hidden-1", hidden=True, secret="one")
    two = inputs.case_seed("lab", "hidden-1", hidden=True, secret="two")
    public = inputs.case_seed("lab", "hidden-1", hidden=False)
    assert len({one, two, public}) == 3
    with pytest.raises(ValueError, match="secret"):
        inputs.case_seed("lab", "hidden-1", hidden=True, secret="")


def _params() -> list[ParamSpec]:
    return [
        ParamSpec("A", "in", "float32", ("M", "N"), InitSpec("uniform", -1.0, 1.0)),
        ParamSpec("B", "in", "int32", ("N",), InitSpec("integers", -3, 3)),
        ParamSpec("C", "out", "float32", ("M",)),
        ParamSpec("M", "scalar", "int32", value="M"),
        ParamSpec("f", "scalar", "float32", init=InitSpec("uniform", 2.0, 3.0)),
    ]


def test_generation_is_reproducible_and_in_range() -> None:
    names = {"M": 7, "N": 5}
    one = inputs.generate_arrays(_params(), names, 1234)
    two = inputs.generate_arrays(_params(), names, 1234)
    other = inputs.generate_arrays(_params(), names, 1235)
    assert set(one) == {"A", "B"}  # outputs get no data: they get the sentinel
    assert one["A"].shape == (7, 5) and one["A"].dtype == np.float32
    assert np.array_equal(one["A"], two["A"]) and not np.array_equal(one["A"], other["A"])
    assert one["A"].min() >= -1 and one["A"].max() <= 1 and np.abs(one["A"]).max() > 0
    assert one["B"].dtype == np.int32 and set(np.unique(one["B"])) <= set(range(-3, 4))


def test_a_parameter_keeps_its_data_when_another_is_added() -> None:
    names = {"M": 4, "N": 4}
    base = inputs.generate_arrays(_params(), names, 99)
    extra = [*_params(), ParamSpec("Z", "in", "float64", ("N",), InitSpec("uniform", 0, 1))]
    more = inputs.generate_arrays(extra, names, 99)
    assert np.array_equal(base["A"], more["A"])


def test_scalars_take_their_dtype() -> None:
    values = inputs.scalar_values(_params(), {"M": 7, "N": 5}, 5)
    assert values["M"] == np.int32(7) and isinstance(values["M"], np.int32)
    assert isinstance(values["f"], np.float32) and 2.0 <= values["f"] <= 3.0


def test_hand_written_inputs_are_the_case_data_and_timed_repetitions_generate() -> None:
    from graders.spec import LiteralInput

    params = [
        ParamSpec("x", "in", "bfloat16", ("n",), InitSpec("uniform", -1.0, 1.0)),
        ParamSpec("k", "in", "uint8", ("n",)),  # every case writes it: no init
        ParamSpec("s", "scratch", "int32", ("n",), InitSpec("zeros")),
        ParamSpec("y", "out", "float32", ("n",)),
    ]
    literals = {
        "x": LiteralInput("x", (1.0, 0.5, -3.0), None, "literal"),
        "k": LiteralInput("k", (0, 255, 7), None, "literal"),
    }
    names = {"n": 3}
    case = inputs.generate_arrays(params, names, 5, literals=literals)
    assert set(case) == {"x", "k", "s"}  # the scratch array's zeros are made every run too
    assert case["x"].dtype == np.uint16 and case["x"].tolist() == [0x3F80, 0x3F00, 0xC040]
    assert case["k"].dtype == np.uint8 and case["k"].tolist() == [0, 255, 7]
    assert case["s"].tolist() == [0, 0, 0]
    timed = inputs.input_sources(params, names, 5, literals=literals, nonce=9, rep=0)
    assert isinstance(timed["x"], int)  # new data from its init for every repetition
    assert isinstance(timed["k"], np.ndarray)  # no init: the values as written
    rep0 = inputs.generate_arrays(params, names, 5, literals=literals, nonce=9, rep=0)
    rep1 = inputs.generate_arrays(params, names, 5, literals=literals, nonce=9, rep=1)
    assert not np.array_equal(rep0["x"], rep1["x"]) and rep0["k"].tolist() == [0, 255, 7]


def test_scalars_of_the_wide_integer_dtypes() -> None:
    params = [
        ParamSpec("n", "scalar", "uint64", value="n"),
        ParamSpec("m", "scalar", "int64", value="-n"),
        ParamSpec("r", "scalar", "uint64", init=InitSpec("integers", 2**63, 2**63 + 5)),
    ]
    values = inputs.scalar_values(params, {"n": 2**40}, 3)
    assert isinstance(values["n"], np.uint64) and values["n"] == 2**40
    assert isinstance(values["m"], np.int64) and values["m"] == -(2**40)
    assert 2**63 <= int(values["r"]) <= 2**63 + 5


def test_the_guard_of_an_integer_input_lies_outside_its_data() -> None:
    from graders.run.buffers import _taken_range

    normal = ParamSpec("d", "in", "uint8", ("n",), InitSpec("normal", mean=128, std=2))
    assert _taken_range(normal, {"n": 1}, None) == (110.0, 146.0)  # 9 deviations either side
    by_hand = ParamSpec("d", "in", "int32", ("n",), InitSpec("integers", -9, 9))
    assert _taken_range(by_hand, {"n": 3}, np.array([5, 2**30, -3])) == (-9.0, 2.0**30)
    assert _taken_range(
        ParamSpec("z", "scratch", "int32", ("n",), InitSpec("zeros")), {}, None
    ) == (
        0.0,
        0.0,
    )
    assert _taken_range(ParamSpec("o", "out", "int32", ("n",)), {}, None) is None
