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
