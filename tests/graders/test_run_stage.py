"""The run stage's bookkeeping that needs no GPU: what a failed comparison leaves in a result."""

from __future__ import annotations

import json

import numpy as np

from graders import compare, run_stage
from graders.results import CaseResult


def _result() -> CaseResult:
    return CaseResult(
        name="n-10000",
        sizes={"n": 10000},
        hidden=False,
        passed=False,
        verdict="wrong_answer",
        message="",
        max_points=10.0,
    )


def test_a_nan_partial_sum_leaves_the_result_json_ready() -> None:
    # A block that adds uninitialised shared memory can write NaN; the service serves these
    # fields as strict JSON, where NaN has no spelling.
    cmp = compare.compare_sum(np.array([1.0, np.nan, 2.0]), 3.0, atol=1e-6, rtol=0)
    assert not cmp.ok
    result = _result()
    run_stage._fill_comparison(result, run_stage.Judgement(False, "wrong_answer", "", cmp))
    json.dumps(result.to_dict(), allow_nan=False)
    assert result.expected == 3.0 and result.got is None
    assert result.max_abs_error is None and result.max_rel_error is None


def test_an_elementwise_inf_keeps_the_finite_evidence() -> None:
    got = np.array([1.0, np.inf, 3.0], dtype=np.float32)
    cmp = compare.compare_elementwise(got, np.array([1.0, 2.0, 3.0]), atol=1e-6, rtol=0)
    result = _result()
    run_stage._fill_comparison(result, run_stage.Judgement(False, "wrong_answer", "", cmp))
    json.dumps(result.to_dict(), allow_nan=False)
    assert result.first_wrong_index == [1] and result.expected == 2.0 and result.got is None
