"""`lab check` on a GPU: every built-in lab's references pass, its faulty kernels get their
verdicts, its tile forms (the declared values written as a platform macro and as two constants
in one declaration) pass as the reference does, and every shortcut probe fails it, the timed
case included; a lab with positive data and a loose tolerance is named weak."""

from __future__ import annotations

import pytest

from graders.labcheck import check_lab
from graders.labcheck.probes import PROBE_KINDS
from graders.labcheck.tile_forms import TILE_FORMS, declaring_reference
from graders.spec import builtin_labs_dir, list_builtin_labs, load_builtin_lab
from tests.graders.labcheck.test_probes import LOOSE_LAB

SECRET = "kernelgrader-test-secret"


@pytest.mark.gpu
@pytest.mark.parametrize("lab_id", list_builtin_labs())
def test_lab_check_passes_on_the_gpu(lab_id: str) -> None:
    report = check_lab(builtin_labs_dir() / lab_id, run=True, secret=SECRET)
    assert report.ok, "\n".join(report.lines())
    ran = [i for i in report.items if i.subject.startswith("run ")]
    lab = load_builtin_lab(lab_id)
    references = [r for r in lab.references if r.file]
    faulty = [
        i for i in report.items if i.subject.startswith("faulty/") and "when run" in i.message
    ]
    # Every reference with a file ran, every faulty kernel that compiles ran too, and so did
    # both tile forms of a lab whose reference declares its names.
    forms = [i for i in ran if i.subject.startswith("run tile form ")]
    expected_forms = len(TILE_FORMS) if declaring_reference(lab) is not None else 0
    assert len(forms) == expected_forms, report.lines()
    assert len(ran) == len(references) + len(faulty) + len(forms), report.lines()
    assert all(i.status == "ok" for i in ran), report.lines()
    skipped = [i for i in report.items if i.status == "skip" and i.subject != "tile forms"]
    assert not skipped, report.lines()
    # Every generated probe ran and failed the lab with a wrong answer on the timed case.
    probes = {i.subject: i for i in report.items if i.subject.startswith("probe ")}
    assert sorted(probes) == sorted(f"probe {kind}" for kind in PROBE_KINDS), report.lines()
    assert all(i.status == "ok" for i in probes.values()), report.lines()
    assert all("the timed case" in i.message for i in probes.values()), report.lines()


@pytest.mark.gpu
def test_lab_check_names_a_lab_whose_shortcuts_pass() -> None:
    # array-sum-atomic as it was before issue 17: positive data and a tolerance wide enough
    # for one float accumulator. Its references still pass; its probes pass the timed case.
    report = check_lab(LOOSE_LAB, run=True, secret=SECRET)
    assert not report.ok
    ran = [i for i in report.items if i.subject.startswith("run reference")]
    assert len(ran) == 2 and all(i.status == "ok" for i in ran), report.lines()
    weak = {i.subject: i.message for i in report.failures if i.subject.startswith("probe ")}
    assert "probe half" in weak, report.lines()
    assert weak["probe half"].startswith(
        "The lab loose-sum is weak: half the work plus an estimate"
    ), weak
    assert "passes the timed case n-8388608" in weak["probe half"], weak
    assert "earn its 10 performance points" in weak["probe half"], weak
    assert "zero-mean inputs" in weak["probe half"], weak
    assert "checks failed for loose-sum" in report.summary()
