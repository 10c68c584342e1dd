"""`lab check` on a GPU: every built-in lab's references pass and its faulty kernels get their
verdicts (labs the run stage cannot run yet are skipped, with the reason, until phase 2)."""

from __future__ import annotations

import pytest

from graders.labcheck import check_lab
from graders.labcheck.gpu import run_stage_gaps
from graders.spec import builtin_labs_dir, list_builtin_labs, load_builtin_lab

SECRET = "kernelgrader-test-secret"


@pytest.mark.gpu
@pytest.mark.parametrize("lab_id", list_builtin_labs())
def test_lab_check_passes_on_the_gpu(lab_id: str) -> None:
    report = check_lab(builtin_labs_dir() / lab_id, run=True, secret=SECRET)
    assert report.ok, "\n".join(report.lines())
    ran = [i for i in report.items if i.subject.startswith("run ")]
    if run_stage_gaps(load_builtin_lab(lab_id)):
        assert not ran and any(i.status == "skip" for i in report.items if i.subject == "GPU")
    else:
        assert ran and all(i.status == "ok" for i in ran), report.lines()
