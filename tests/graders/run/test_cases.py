"""The run stage's bookkeeping that needs no GPU: what a failed comparison leaves in a result."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from graders.results import CaseResult
from graders.run import cases as run_stage
from graders.run import compare


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
    run_stage.fill_comparison(result, run_stage.Judgement(False, "wrong_answer", "", cmp))
    json.dumps(result.to_dict(), allow_nan=False)
    assert result.expected == 3.0 and result.got is None
    assert result.max_abs_error is None and result.max_rel_error is None


def test_an_elementwise_inf_keeps_the_finite_evidence() -> None:
    got = np.array([1.0, np.inf, 3.0], dtype=np.float32)
    cmp = compare.compare_elementwise(got, np.array([1.0, 2.0, 3.0]), atol=1e-6, rtol=0)
    result = _result()
    run_stage.fill_comparison(result, run_stage.Judgement(False, "wrong_answer", "", cmp))
    json.dumps(result.to_dict(), allow_nan=False)
    assert result.first_wrong_index == [1] and result.expected == 2.0 and result.got is None


_WITHHELD = r"""
import ctypes, os, sys
from graders.run.output import withheld_output
from graders.spec import CaseSpec

libc = ctypes.CDLL(None)
print("visible-before", flush=True)
with withheld_output(CaseSpec("hidden-large", {"n": 5000011}, 10.0, True)):
    os.write(1, b"secret-os-write\n")
    print("secret-print")
    libc.printf(b"secret-c-stdio\n")  # buffered in C's stdout, as the driver's printf is
with withheld_output(CaseSpec("n-1000", {"n": 1000}, 10.0, False)):
    libc.printf(b"visible-c-stdio\n")
libc.fflush(None)
print("visible-after", flush=True)
"""


def test_a_hidden_cases_output_goes_nowhere() -> None:
    # The kernel's printf reaches stdout through C's stdio; run it in a fresh interpreter whose
    # stdout is a pipe, as the sandboxed child's is.
    done = subprocess.run(
        [sys.executable, "-c", _WITHHELD], capture_output=True, text=True, timeout=120, check=True
    )
    out = done.stdout
    assert "secret-" not in out, out
    assert "visible-before" in out and "visible-c-stdio" in out and "visible-after" in out
    assert "[grader] The output of hidden case hidden-large is not shown." in out
