"""`lab check` on a GPU: every built-in lab's references pass and its faulty kernels get their
verdicts."""

from __future__ import annotations

import pytest

from graders.labcheck import check_lab
from graders.spec import builtin_labs_dir, list_builtin_labs, load_builtin_lab

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
    # Every reference with a file ran, and every faulty kernel that compiles ran too.
    assert len(ran) == len(references) + len(faulty), report.lines()
    assert all(i.status == "ok" for i in ran), report.lines()
    assert not [i for i in report.items if i.status == "skip"], report.lines()
