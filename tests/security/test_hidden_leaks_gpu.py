"""What a kernel learns in a hidden case never reaches the student before the due date: hidden
cases run after the timed section, and nothing the process prints or says after one is shown.

Kernels: tests/security/kernels/hidden_sizes_printed_later.cu and hidden_sizes_in_messages.cu.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from graders.grade import grade_source
from graders.results import HIDDEN_OUTPUT_NOTE
from tests.security.hostile import KERNELS_DIR
from tests.security.lab_copies import lab_copy

SECRET = "hidden-leak-tests"
# The hidden case's sizes are odd ones that appear nowhere else.
HIDDEN = {"M": 97, "N": 89, "K": 83}


def _lab(tmp_path: Path):  # noqa: ANN202
    return lab_copy(
        "matmul-tiled",
        tmp_path,
        cases=[
            {"name": "rect-63x65x70", "sizes": {"M": 63, "N": 65, "K": 70}},
            {"name": "square-64", "sizes": {"M": 64, "N": 64, "K": 64}},
            {"name": "hidden-odd", "sizes": HIDDEN, "hidden": True},
            {"name": "square-128", "sizes": {"M": 128, "N": 128, "K": 128}},
        ],
        timed="square-128",
        settings={"budget_seconds": "0.5", "max_reps": "40", "sanitizer": "false"},
    )


def _visible_text(report) -> str:  # noqa: ANN001
    """Everything a student reads at once: the output and every visible case's details."""
    parts = [report.stdout, report.summary]
    for case in report.cases:
        if not case.hidden:
            parts += [case.message, str(case.expected), str(case.got), str(case.first_wrong_index)]
    return "\n".join(parts)


@pytest.mark.gpu
def test_sizes_printed_in_later_launches_never_show(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    source = (KERNELS_DIR / "hidden_sizes_printed_later.cu").read_text(encoding="utf-8")
    report = grade_source(lab, source, secret=SECRET, timing=True, sanitizer=False)
    assert all(c.passed for c in report.cases), [(c.name, c.message) for c in report.cases]
    timed = next(c for c in report.cases if c.name == "square-128")
    assert timed.timing is not None, "the timed case is timed, before the hidden one"
    shown = _visible_text(report)
    assert "seen size M=128" in shown  # the kernel's own prints of public sizes get through
    assert "M=97" not in shown and "N=89" not in shown, shown[-2000:]
    assert HIDDEN_OUTPUT_NOTE.format(name="hidden-odd") in report.stdout


@pytest.mark.gpu
def test_sizes_encoded_in_wrong_answers_never_show(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    source = (KERNELS_DIR / "hidden_sizes_in_messages.cu").read_text(encoding="utf-8")
    report = grade_source(lab, source, secret=SECRET, timing=True, sanitizer=False)
    visible = [c for c in report.cases if not c.hidden]
    # Every public launch ran before the hidden one: the kernel had nothing to encode.
    assert all(c.passed for c in visible), [(c.name, c.message) for c in visible]
    timed = next(c for c in report.cases if c.name == "square-128")
    assert timed.timing is not None
    assert "97" not in _visible_text(report).replace("hidden-odd", "")
