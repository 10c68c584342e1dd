"""Spec features no built-in lab uses, run for real: float16 and bfloat16 data, an int64 scalar,
a Python check(), a sorted_permutation output, a lab whose oracle fails, and scratch data made
again before every timed repetition."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from graders.grade import grade_source
from graders.spec import LabSpec, builtin_labs_dir, load_builtin_lab, load_lab

SECRET = "kernelgrader-test-secret"
KERNELS = Path(__file__).parent / "kernels"

MIXED = """\
[lab]
id = "mixed"
title = "Half-width floats"
kernel = "mul"

[[params]]
name = "a"
kind = "in"
dtype = "float16"
shape = ["rows * cols"]
init = { dist = "normal", mean = 0.0, std = 2.0 }

[[params]]
name = "b"
kind = "in"
dtype = "bfloat16"
shape = ["rows * cols"]
init = { dist = "uniform", low = -4.0, high = 4.0 }

[[params]]
name = "c"
kind = "out"
dtype = "bfloat16"
shape = ["rows * cols"]

[[params]]
name = "d"
kind = "out"
dtype = "float16"
shape = ["rows", "cols"]
check = ["elementwise", "rows_sum_to_one"]

[[params]]
name = "n"
kind = "scalar"
dtype = "int64"
value = "rows * cols"

[[params]]
name = "cols"
kind = "scalar"
dtype = "int32"
value = "cols"

[[params]]
name = "alpha"
kind = "scalar"
dtype = "float32"
value = "alpha"

[[launch]]
block = [256]
grid = ["ceil(rows * cols / 256)"]

[expected]
oracle = "python"

[tolerance.bfloat16]
atol = 1e-2
rtol = 1e-2

[tolerance.float16]
atol = 1e-3
rtol = 1e-3

[[cases]]
name = "big"
sizes = { rows = 1000, cols = 1000, alpha = 0.5 }
points = 1

[[cases]]
name = "by-hand"
sizes = { rows = 1, cols = 3, alpha = 2.0 }
points = 1
inputs = { a = [1.0, 2.0, 0.5], b = [3, 0.25, -1] }
"""

MIXED_ORACLE = """\
import numpy as np


def expected(inputs, sizes, scalars):
    c = inputs["a"].astype(np.float64) * inputs["b"].astype(np.float64) * scalars["alpha"]
    return {"c": c, "d": np.full((sizes["rows"], sizes["cols"]), 1.0 / sizes["cols"])}


def check(outputs, expected, inputs, sizes):
    # bfloat16 reads as float32 values, float16 as itself.
    kinds = (outputs["c"].dtype, outputs["d"].dtype, inputs["b"].dtype)
    return kinds == (np.float32, np.float16, np.float32), f"dtypes {kinds}"
"""

SORT = """\
[lab]
id = "sorting"
title = "Sort by rank"
kernel = "rank_sort"

[[params]]
name = "keys"
kind = "in"
dtype = "int32"
shape = ["n"]
init = { dist = "integers", low = -50, high = 50 }

[[params]]
name = "out"
kind = "out"
dtype = "int32"
shape = ["n"]
check = "sorted_permutation"

[[params]]
name = "n"
kind = "scalar"
dtype = "int32"
value = "n"

[[launch]]
block = [256]
grid = ["ceil(n / 256)"]

[expected]
oracle = "python"

[[cases]]
name = "n-3000"
sizes = { n = 3000 }
points = 1

[[cases]]
name = "by-hand"
sizes = { n = 4 }
points = 1
inputs = { keys = [3, -1, 2, 2] }
"""


def _lab(root: Path, lab_id: str, spec: str, oracle: str) -> LabSpec:
    folder = root / lab_id
    folder.mkdir()
    (folder / "lab.toml").write_text(spec, encoding="utf-8")
    (folder / "lab.md").write_text(f"# {lab_id}\n", encoding="utf-8")
    (folder / "oracle.py").write_text(oracle, encoding="utf-8")
    return load_lab(folder)


def _verdicts(report) -> dict[str, str]:  # noqa: ANN001
    return {c.name: c.verdict for c in report.cases}


@pytest.mark.gpu
def test_half_width_floats_an_int64_scalar_and_a_python_check(tmp_path: Path) -> None:
    lab = _lab(tmp_path, "mixed", MIXED, MIXED_ORACLE)
    source = (KERNELS / "mixed_precision.cu").read_text(encoding="utf-8")
    right = grade_source(lab, source.replace("ALPHA_FACTOR", "alpha"), secret=SECRET,
                         sanitizer=False, timing=False)  # fmt: skip
    assert right.error == "", right.summary
    assert _verdicts(right) == {"big": "pass", "by-hand": "pass"}, right.cases
    # Without alpha, c is wrong in both cases (alpha is 0.5 and 2).
    wrong = grade_source(lab, source.replace("ALPHA_FACTOR", "1.0f"), secret=SECRET,
                         sanitizer=False, timing=False)  # fmt: skip
    assert _verdicts(wrong) == {"big": "wrong_answer", "by-hand": "wrong_answer"}
    by_hand = next(c for c in wrong.cases if c.name == "by-hand")
    assert by_hand.message.startswith("3 of 3 elements of c are wrong; the first is c[0]: ")
    assert by_hand.expected == 6.0 and by_hand.got == 3.0


@pytest.mark.gpu
def test_a_sorted_permutation_output(tmp_path: Path) -> None:
    lab = _lab(tmp_path, "sorting", SORT, "def expected(inputs, sizes, scalars):\n    return {}\n")
    source = (KERNELS / "rank_sort.cu").read_text(encoding="utf-8")
    right = grade_source(lab, source.replace("SORTED", "1"), secret=SECRET, sanitizer=False,
                         timing=False)  # fmt: skip
    assert _verdicts(right) == {"n-3000": "pass", "by-hand": "pass"}, right.cases
    wrong = grade_source(lab, source.replace("SORTED", "0"), secret=SECRET, sanitizer=False,
                         timing=False)  # fmt: skip
    by_hand = next(c for c in wrong.cases if c.name == "by-hand")
    assert by_hand.verdict == "wrong_answer"
    assert by_hand.message == "out is not in ascending order: out[0] = 3 comes before out[1] = -1."


@pytest.mark.gpu
def test_a_lab_whose_oracle_fails_is_the_graders_error(tmp_path: Path) -> None:
    folder = Path(shutil.copytree(builtin_labs_dir() / "histogram", tmp_path / "histogram"))
    (folder / "oracle.py").write_text(
        "import numpy as np\n\n\ndef expected(inputs, sizes, scalars):\n"
        "    raise ValueError('the oracle is broken')\n"
    )
    lab = load_lab(folder)
    report = grade_source(lab, lab.reference("shared").source, secret=SECRET, sanitizer=False,
                          timing=False)  # fmt: skip
    assert report.error == "internal"
    assert "lab's own Python oracle failed (not your fault" in report.summary
    assert "oracle.py line 5, in expected): ValueError: the oracle is broken" in report.summary
    assert {c.verdict for c in report.cases} == {"not_run"}
    assert report.score == 0


@pytest.mark.gpu
def test_zeroed_scratch_is_made_again_before_every_timed_repetition() -> None:
    lab = load_builtin_lab("prefix-sum")
    assert lab.timing is not None
    # The reference, but adding each block's total into block_sums (atomicAdd) rather than
    # storing it: right only when block_sums starts at zero on every run.
    source = lab.reference("shuffle").source
    adding = source.replace(
        "block_sums[blockIdx.x] = total;", "atomicAdd(&block_sums[blockIdx.x], total);"
    )
    assert adding != source
    report = grade_source(lab, adding, secret=SECRET, sanitizer=False)
    failed = [(c.name, c.message) for c in report.cases if not c.passed]
    assert not failed, failed
    timed = next(c for c in report.cases if c.name == lab.timing.case)
    assert timed.timing is not None and timed.timing.reps >= lab.timing.min_reps
