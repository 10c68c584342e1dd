"""What the API says about a case: a float case parameter (a leaky ReLU's alpha) is a size too."""

from __future__ import annotations

from app.submissions.schemas import CaseRead


def test_a_case_may_have_float_sizes() -> None:
    case = CaseRead(
        name="n-1000", hidden=False, passed=True, sizes={"n": 1000, "alpha": 0.01},
        verdict="pass", message="", points=5.0, max_points=5.0, seed="7", errors=None,
        timings=None,
    )  # fmt: skip
    assert case.sizes == {"n": 1000, "alpha": 0.01}
    assert isinstance(case.sizes["n"], int) and isinstance(case.sizes["alpha"], float)
    assert case.model_dump(mode="json")["sizes"] == {"n": 1000, "alpha": 0.01}
