"""Every lab's reference kernels pass their own lab with full correctness points (on a GPU)."""

from __future__ import annotations

import pytest

from graders.grade import compile_reference, run_submission
from graders.spec import LabSpecError, list_builtin_labs, load_builtin_lab

SECRET = "kernelgrader-test-secret"


def _reference_files() -> list[tuple[str, str]]:
    pairs = []
    for lab_id in list_builtin_labs():
        try:
            lab = load_builtin_lab(lab_id)
        except LabSpecError:
            pairs.append((lab_id, "(spec does not load)"))  # the test then says why
            continue
        pairs += [(lab_id, r.name) for r in lab.references if r.file]
    return pairs


@pytest.mark.gpu
@pytest.mark.parametrize(("lab_id", "ref_name"), _reference_files())
def test_reference_passes_its_lab(lab_id: str, ref_name: str) -> None:
    lab = load_builtin_lab(lab_id)
    ref = lab.reference(ref_name)
    # Compiled as a reference: a tiled lab's naive baseline need not meet the lab's `requires`.
    compiled = compile_reference(lab, ref_name)
    assert compiled.ok, f"{compiled.message}\n{compiled.log}"
    report = run_submission(
        lab, ref.source, compiled=compiled, secret=SECRET, sanitizer=False, timing=False
    )
    failed = [f"{c.name}: {c.verdict}: {c.message}" for c in report.cases if not c.passed]
    assert not failed, "\n".join(failed)
    assert report.correctness_points == lab.correctness_points
    assert report.error == ""
    # Every case carries the seed its inputs came from, and hidden ones differ from visible.
    assert all(c.seed > 0 for c in report.cases)
