"""Judging outputs, on NumPy arrays (the run stage's code is the same on CuPy ones): what was
never written, the comparison with the answer, and the properties; and the grading's error when
the lab's own oracle fails."""

from __future__ import annotations

import dataclasses

import numpy as np

from graders.results import GradeReport
from graders.run import compare
from graders.run.buffers import DeviceArray, DeviceArrays
from graders.run.judge import Answers, _compare, _never_written, _property
from graders.run.stage import _Follow, _take_outcome
from graders.sandbox.runner import SandboxOutcome
from graders.spec import load_builtin_lab


def _arrays(lab_id: str, case: str, **outputs: np.ndarray) -> DeviceArrays:
    """The case's outputs held in NumPy arrays, as DeviceArrays holds CuPy ones."""
    lab = load_builtin_lab(lab_id)
    names = lab.sizes_for(case)
    arrays = DeviceArrays(lab, names)
    for name, data in outputs.items():
        param = lab.param(name)
        arrays.arrays[name] = DeviceArray(
            param, data.dtype, data.shape, data.view(np.uint8), data, 0, 0
        )
    return arrays


def test_an_output_checked_only_for_properties_must_be_written_everywhere() -> None:
    y = compare.sentinel_array(np.dtype(np.float32), (7, 1000))
    arrays = _arrays("softmax", "small-7x1000", y=y)
    # softmax's y is also compared with the answer: judge a variant checked for properties only
    only = dataclasses.replace(arrays.lab.param("y"), check="none")
    arrays.lab = dataclasses.replace(arrays.lab, params=[only, *arrays.lab.params[1:]])
    arrays.arrays["y"].param = only
    judged = _never_written(arrays.lab, arrays)
    assert judged is not None and judged.verdict == "no_output"
    y[:, :500] = 1.0 / 1000
    judged = _never_written(arrays.lab, arrays)
    assert judged is not None and judged.verdict == "wrong_answer"
    assert judged.message.startswith("3500 of 7000 elements of y were never written")
    assert judged.message.endswith("the first is y[0, 500].")
    y[:] = 1.0 / 1000
    assert _never_written(arrays.lab, arrays) is None
    assert _property(arrays.lab, only, "rows_sum_to_one", arrays) is None
    y[3, 0] = 0.5
    problem = _property(arrays.lab, only, "rows_sum_to_one", arrays)
    assert problem is not None and "the first is row 3" in problem


def test_outputs_are_compared_with_the_answer_in_order() -> None:
    bins = np.bincount(np.arange(300) % 256, minlength=256).astype(np.uint32)
    arrays = _arrays("histogram", "n-1000", bins=bins)
    answer = Answers({"bins": bins.astype(np.int64)})
    judged = _compare(arrays.lab, arrays, answer)
    assert judged is not None and judged.passed
    bins[7] += 1
    judged = _compare(arrays.lab, arrays, answer)
    assert judged is not None and not judged.passed and judged.verdict == "wrong_answer"
    assert judged.message.startswith("1 of 256 elements of bins are wrong; the first is bins[7]")


def _outcome(value: dict) -> SandboxOutcome:
    return SandboxOutcome(
        ok=True, value=value, reason="", message="", exit_code=0, signal=None, timed_out=False,
        stdout="", stdout_truncated=False, seconds=1.0,
    )  # fmt: skip


def test_a_failing_lab_oracle_is_the_graders_error_never_the_students_verdict() -> None:
    lab = load_builtin_lab("histogram")
    report = GradeReport(lab=lab.id, cases=[], score=0, max_score=lab.max_score)
    results: dict = {}
    fault = "The lab's expected() failed on case n-1000 (oracle.py line 4, in expected): ..."
    value = {
        "cases": [
            {"name": "n-1", "sizes": {"n": 1}, "hidden": False, "passed": True,
             "verdict": "pass", "message": "", "points": 3.0, "max_points": 3.0},
            {"name": "n-1000", "sizes": {"n": 1000}, "hidden": False, "passed": False,
             "verdict": "not_run", "message": "Not run", "points": 0.0, "max_points": 4.0},
        ],
        "stopped": "",
        "lab_fault": fault,
    }  # fmt: skip
    follow = _Follow(["n-1", "n-1000"], results, None)
    assert _take_outcome(lab, _outcome(value), follow, results, report, {}) == ""
    assert report.error == "internal"
    assert "lab's own Python oracle failed (not your fault" in report.summary
    assert fault in report.summary
    assert set(results) == {"n-1"}  # the case it failed on has no verdict
