"""A kernel's printf output: shown for visible cases, withheld for hidden ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from graders.grade import grade_source
from graders.spec import load_builtin_lab

SECRET = "kernelgrader-test-secret"
KERNELS = Path(__file__).parent / "kernels"


@pytest.mark.gpu
def test_a_hidden_cases_printf_output_is_not_shown() -> None:
    lab = load_builtin_lab("vector-scale")
    source = (KERNELS / "prints_its_size.cu").read_text(encoding="utf-8")
    report = grade_source(lab, source, secret=SECRET, sanitizer=False, timing=False)
    assert all(c.passed for c in report.cases), [(c.name, c.message) for c in report.cases]
    hidden = [c for c in lab.cases if c.hidden]
    assert hidden, "the lab needs a hidden case for this test"
    for case in lab.cases:
        line = f"kg-size n={case.sizes['n']}\n"
        if case.hidden:
            assert line not in report.stdout, report.stdout[-2000:]
            assert f"The output of hidden case {case.name} is not shown." in report.stdout
        else:
            assert line in report.stdout, report.stdout[-2000:]
