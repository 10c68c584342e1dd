"""Tile forms without a GPU: every built-in lab that declares a tile has its reference rewritten
as careful students write it (a platform macro, two constants in one declaration), and the
grader reads from each the values the reference itself gets (issue 34)."""

from __future__ import annotations

import pytest

from graders.labcheck import check as check_module
from graders.labcheck import check_lab
from graders.labcheck.report import LabCheckReport
from graders.labcheck.tile_forms import (
    PLATFORM_MACRO,
    TILE_FORMS,
    TWO_CONSTANTS,
    TileForm,
    declaring_reference,
    tile_forms,
)
from graders.spec import builtin_labs_dir, load_builtin_lab

ARCH = "sm_90"


def test_the_forms_are_written_as_the_issue_saw_them() -> None:
    forms, notes = tile_forms(load_builtin_lab("matrix-transpose"))
    assert notes == [] and [f.kind for f in forms] == list(TILE_FORMS)
    platform = forms[0].source
    assert (
        "#if defined(__HIP_PLATFORM_AMD__)\n#define TILE_DIM ((32) + 1)\n#else\n"
        "#define TILE_DIM 32\n#endif\n"
    ) in platform
    assert "constexpr int TILE_DIM = (32), BLOCK_ROWS = (8);" in forms[1].source
    assert "#define TILE_DIM" not in forms[1].source
    # One declared name gets a second constant beside it: two in one declaration all the same.
    two_constants = tile_forms(load_builtin_lab("matmul-tiled"))[0][1]
    assert "constexpr int TILE_WIDTH = (32), kg_tile_width_half = TILE_WIDTH / 2;" in (
        two_constants.source
    )


def assert_tile_forms_read_as_the_reference(report: LabCheckReport, lab_id: str) -> None:
    """For tests/graders/labcheck/test_check.py, which runs lab check on every built-in lab."""
    forms = {i.subject: i for i in report.items if i.subject.startswith("tile form")}
    lab = load_builtin_lab(lab_id)
    if not lab.declares:
        assert forms == {}, report.lines()
    elif declaring_reference(lab) is None:
        assert forms["tile forms"].status == "skip", report.lines()
    else:
        assert sorted(forms) == [f"tile form {PLATFORM_MACRO}", f"tile form {TWO_CONSTANTS}"]
        for item in forms.values():
            assert item.status == "ok" and "; the grader reads " in item.message, item


def test_a_form_read_otherwise_than_its_reference_fails_the_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What lab check says where the grader misreads a form (as it read case 1's 16 for 32).
    lab = load_builtin_lab("matrix-transpose")
    reference = lab.reference(lab.scoring.target or "tiled").source
    misread = reference.replace("#define BLOCK_ROWS 8", "#define BLOCK_ROWS 16")
    fake = TileForm(PLATFORM_MACRO, "tiled.cu", misread)
    monkeypatch.setattr(check_module, "tile_forms", lambda _lab: ([fake], []))
    report = check_lab(builtin_labs_dir() / "matrix-transpose", arch=ARCH)
    (failure,) = report.failures
    assert failure.subject == f"tile form {PLATFORM_MACRO}"
    assert failure.message == (
        "the grader reads TILE = 32, ROWS = 16 from tiled.cu written in this form, but TILE = "
        "32, ROWS = 8 from the reference itself: the launch would not match the kernel"
    )


def test_a_form_whose_names_are_not_read_fails_even_where_the_defaults_agree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # matrix-transpose's reference declares its defaults (32, 8): a reader that read nothing
    # (as the text reader read `constexpr int TILE_DIM = 32, BLOCK_ROWS = 8;`) launched the
    # same values by chance, and must fail all the same.
    lab = load_builtin_lab("matrix-transpose")
    reference = lab.reference(lab.scoring.target or "tiled").source
    unread = (
        reference.replace("#define TILE_DIM 32", "#define TILE_DIM_ 32")
        .replace("#define BLOCK_ROWS 8", "#define BLOCK_ROWS_ 8\n#define TILE_DIM TILE_DIM_")
        .replace("+= BLOCK_ROWS", "+= BLOCK_ROWS_")
    )
    fake = TileForm(TWO_CONSTANTS, "tiled.cu", unread)
    monkeypatch.setattr(check_module, "tile_forms", lambda _lab: ([fake], []))
    report = check_lab(builtin_labs_dir() / "matrix-transpose", arch=ARCH)
    (failure,) = report.failures
    assert failure.message.startswith(
        "the grader reads TILE = 32, ROWS = 8 by default from tiled.cu written in this form, "
        "but TILE = 32, ROWS = 8 from the reference itself"
    ), failure.message
