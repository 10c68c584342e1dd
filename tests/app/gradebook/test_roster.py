"""The staff's view of a lab at its edges: every filter on both sides of its line, what the zip
holds for review and how it names things, the GPU groups of kernel times.

Written against the survivors of scripts/mutation.py (app/gradebook/lab_roster.py).
"""

from __future__ import annotations

import csv
import io
import zipfile
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy.orm import Session

from app.core.errors import Invalid
from app.courses.deadlines import Deadline
from app.gradebook.lab_roster import (
    StudentRow,
    _keep,
    _safe,
    counted_sources_zip,
    for_review,
    kernel_time_groups,
    lab_roster,
)
from app.policy.counting import Counted, LabCell
from app.submissions.models import Status
from tests.app.conftest import World
from tests.app.factories import make_submission

T0 = datetime(2030, 3, 1, 12, 0, tzinfo=UTC)
MOST = 10.0  # the lab's maximum (points_possible)


def row(
    *,
    score: float | None = None,
    pending: int = 0,
    attempts: int = 1,
    late: bool = False,
    extended: bool = False,
    email: str = "ada@uni.edu",
    name: str = "Ada Lovelace",
    **kw: Any,
) -> StudentRow:
    counted = None if score is None else Counted(score, late, 1)
    return StudentRow(
        student=SimpleNamespace(email=email, name=name),  # type: ignore[arg-type]
        cell=LabCell(counted, pending),
        attempts=attempts,
        last=kw.get("last"),
        counted=kw.get("counted"),
        deadline=Deadline(T0, T0, extended),
        timed=kw.get("timed"),
        compiled=kw.get("compiled"),
    )


def keep(r: StudentRow, **kw: Any) -> bool:
    args: dict[str, Any] = dict(status=None, late=None, extension=None, query=None)
    args.update(kw)
    return _keep(r, MOST, **args)


def test_the_status_filters_at_full_marks_and_just_under() -> None:
    full, under, none = row(score=10.0), row(score=9.99), row()
    assert [keep(r, status="full") for r in (full, under, none)] == [True, False, False]
    assert [keep(r, status="not_full") for r in (full, under, none)] == [False, True, True]
    assert [keep(r, status="scored") for r in (full, under, none)] == [True, True, False]
    assert keep(row(attempts=0), status="none") and not keep(row(attempts=1), status="none")
    assert keep(row(pending=1), status="pending") and not keep(row(pending=0), status="pending")
    assert keep(row(pending=0), status=None) and keep(row(pending=0), status="")


def test_late_extension_and_name_filters() -> None:
    late = row(score=5.0, late=True)
    assert keep(late, late=True) and not keep(late, late=False)
    assert keep(row(score=5.0), late=False) and not keep(row(), late=True)
    assert keep(row(extended=True), extension=True) and not keep(row(), extension=True)
    assert keep(row(), extension=False) and not keep(row(extended=True), extension=False)
    assert keep(row(), query="  LOVELACE ") and keep(row(), query="ada@UNI")
    assert not keep(row(), query="babbage")
    assert keep(row(name="", email="x@uni.edu"), query="x@")


def test_an_unknown_status_filter_is_a_sentence(session: Session, world: World) -> None:
    with pytest.raises(Invalid) as refused:
        lab_roster(session, lab=world.lab, status="late")
    assert str(refused.value) == (
        "'late' is not a status filter; use one of: none, pending, scored, full, not_full."
    )


def test_kernel_times_are_grouped_by_gpu_model_biggest_group_first() -> None:
    def timed(model: str, ms: float) -> StudentRow:
        return row(timed=SimpleNamespace(gpu_model=model, median_ms=ms))

    rows = [timed("A100", 1.0), timed("H100", 0.5), row(), timed("H100", 0.7), timed("L4", 3.0)]
    assert kernel_time_groups(rows) == [("H100", [0.5, 0.7]), ("A100", [1.0]), ("L4", [3.0])]
    assert kernel_time_groups([]) == []


def test_names_in_the_zip_are_safe_and_short() -> None:
    assert _safe("ada.l+x@uni-1.edu") == "ada.l+x@uni-1.edu"
    assert _safe("a b/c\\d:é") == "a_b_c_d__"
    assert _safe("x" * 150) == "x" * 100
    assert _safe("") == "file"


def sub(minute: int, status: Status, *, graded: bool = True) -> Any:
    at = T0 + timedelta(minutes=minute)
    return SimpleNamespace(
        status=status.value, created_at=at, graded_at=at if graded else None, name=minute
    )


def test_what_the_zip_holds_for_review() -> None:
    error, graded = sub(1, Status.compile_error), sub(0, Status.graded)
    later_compiled = sub(2, Status.graded)
    waiting = sub(3, Status.compiled, graded=False)
    older_compiled = sub(0, Status.graded)
    assert for_review(row(counted=graded, compiled=later_compiled)) == (graded, "counted")
    assert for_review(row(counted=error, compiled=later_compiled)) == (
        later_compiled,
        "latest that compiled",
    )
    assert for_review(row(counted=error, compiled=waiting)) == (
        waiting,
        "latest that compiled (not graded yet)",
    )
    assert for_review(row(counted=error, compiled=older_compiled)) == (error, "counted")
    assert for_review(row(counted=None, compiled=waiting, last=error)) == (
        waiting,
        "latest that compiled (not graded yet)",
    )
    assert for_review(row(counted=None, compiled=None, last=error)) == (
        error,
        "latest (not graded yet)",
    )
    same_time = sub(1, Status.graded)
    assert for_review(row(counted=error, compiled=same_time)) == (error, "counted")


def test_the_roster_in_email_order_with_attempts_last_compiled_and_team(
    session: Session, world: World
) -> None:
    student, other = world.student.user, world.other_student.user
    first = make_submission(session, user=student, lab=world.lab, score=4.0, created_at=T0)[0]
    same_time = make_submission(session, user=student, lab=world.lab, score=2.0, created_at=T0)[0]
    first.compile_ok = same_time.compile_ok = True
    broken = make_submission(
        session,
        user=student,
        lab=world.lab,
        status=Status.compile_error,
        score=0.0,
        created_at=T0 + timedelta(minutes=1),
    )[0]
    broken.compile_ok = False
    session.flush()
    rows = {r.student.id: r for r in lab_roster(session, lab=world.lab)}
    emails = [r.student.email for r in lab_roster(session, lab=world.lab)]
    assert emails == sorted(emails)
    mine = rows[student.id]
    assert mine.attempts == 3 and mine.last is broken and mine.compiled is same_time
    assert mine.counted is first and mine.cell.score == 4.0
    assert rows[other.id].attempts == 0 and rows[other.id].last is None
    assert rows[other.id].compiled is None and rows[other.id].team == ""


def test_a_team_submission_is_on_every_members_row(session: Session, world: World) -> None:
    world.lab.team_size = 2
    world.pair_up(session, now=T0)
    from app.submissions.service import create_submission

    made = create_submission(
        session,
        user=world.student.user,
        course=world.course,
        lab=world.lab,
        filename="k.cu",
        data=b"__global__ void k() {}\n",
        now=T0,
    ).submission
    session.flush()
    rows = {r.student.id: r for r in lab_roster(session, lab=world.lab)}
    for member in (world.student.user, world.other_student.user):
        assert rows[member.id].attempts == 1 and rows[member.id].last is made
        assert rows[member.id].team == "Pair"


def test_the_zip_holds_each_students_pick_with_a_manifest(session: Session, world: World) -> None:
    student, other = world.student.user, world.other_student.user
    counted = make_submission(session, user=student, lab=world.lab, score=7.5, created_at=T0)[0]
    counted.filename, counted.source_text, counted.late = "dir/kernel.txt", "// mine\n", True
    waiting = make_submission(
        session, user=other, lab=world.lab, status=Status.queued, created_at=T0
    )[0]
    waiting.filename, waiting.source_text = "theirs.cuh", "// theirs\n"
    session.flush()
    out = io.BytesIO()
    counted_sources_zip(session, lab=world.lab, now=T0 + timedelta(days=1), out=out)
    archive = zipfile.ZipFile(io.BytesIO(out.getvalue()))
    slug = world.lab.slug
    mine_path = f"{slug}/{_safe(student.email)}/dir_kernel.txt.cu"
    theirs_path = f"{slug}/{_safe(other.email)}/theirs.cuh"
    assert sorted(archive.namelist()) == sorted([mine_path, theirs_path, f"{slug}/manifest.csv"])
    assert archive.read(mine_path) == b"// mine\n" and archive.read(theirs_path) == b"// theirs\n"
    assert archive.getinfo(mine_path).date_time == (2030, 3, 1, 12, 0, 0)
    assert archive.getinfo(f"{slug}/manifest.csv").date_time == (2030, 3, 2, 12, 0, 0)
    assert archive.getinfo(mine_path).compress_type == zipfile.ZIP_DEFLATED
    manifest = list(csv.reader(io.StringIO(archive.read(f"{slug}/manifest.csv").decode())))
    assert manifest[0] == [
        "email",
        "name",
        "submission_id",
        "which",
        "score",
        "late",
        "created_at",
        "sha256",
        "path",
    ]
    by_email = {line[0]: line for line in manifest[1:]}
    assert by_email[student.email] == [
        student.email,
        student.name,
        str(counted.id),
        "counted",
        "7.5",
        "1",
        T0.isoformat(),
        counted.sha256,
        mine_path,
    ]
    assert by_email[other.email][3:6] == ["latest (not graded yet)", "", "0"]
    assert len(manifest) == 3  # students without a submission have no line


def test_two_students_whose_folders_would_clash_get_two_folders(
    session: Session, world: World
) -> None:
    from app.courses.models import Role
    from app.courses.service import enroll
    from app.users.service import ensure_user

    names = []
    for email in (f"a!b@{world.course.slug}.edu", f"a#b@{world.course.slug}.edu"):
        user = ensure_user(session, email=email, name="")
        enroll(session, user=user, course=world.course, role=Role.student)
        make_submission(session, user=user, lab=world.lab, score=1.0, created_at=T0)
        names.append(_safe(email))
    session.flush()
    out = io.BytesIO()
    counted_sources_zip(session, lab=world.lab, now=T0, out=out)
    paths = set(zipfile.ZipFile(io.BytesIO(out.getvalue())).namelist())
    folder = names[0]
    assert names[0] == names[1]
    assert {f"{world.lab.slug}/{folder}/scale.cu", f"{world.lab.slug}/{folder}-2/scale.cu"} <= paths


def _ensure_student(session: Session, world: World, local: str) -> Any:
    from app.courses.models import Role
    from app.courses.service import enroll
    from app.users.service import ensure_user

    user = ensure_user(session, email=f"{local}@{world.course.slug}.edu", name=local.title())
    enroll(session, user=user, course=world.course, role=Role.student)
    return user


def test_the_roster_goes_by_email_whatever_the_order_students_joined(
    session: Session, world: World
) -> None:
    late_comer = _ensure_student(session, world, "aaa-first-by-email")
    session.flush()
    rows = lab_roster(session, lab=world.lab)
    assert rows[0].student.id == late_comer.id
    assert [r.student.email for r in rows] == sorted(r.student.email for r in rows)
    from app.gradebook.service import gradebook_csv

    book = list(csv.reader(io.StringIO(gradebook_csv(session, course=world.course))))
    assert book[1][2] == late_comer.email
    assert [line[2] for line in book[1:]] == sorted(line[2] for line in book[1:])


def test_the_roster_reads_each_students_extension_rubric_and_late_flag(
    session: Session, world: World
) -> None:
    from app.policy.rules import grant_extension
    from app.rubric.models import RubricItem, RubricScore

    world.lab.due_at = T0
    student, other = world.student.user, world.other_student.user
    late = make_submission(
        session, user=other, lab=world.lab, score=6.0, late=True, created_at=T0 + timedelta(hours=2)
    )[0]
    late.points_adjustment = 1.5
    grant_extension(
        session,
        course=world.course,
        lab=world.lab,
        student=student,
        due_at=T0 + timedelta(days=1),
        granted_by=None,
    )
    item = RubricItem(lab_id=world.lab.id, position=0, title="style", max_points=2.0)
    session.add(item)
    session.flush()
    session.add(RubricScore(item_id=item.id, lab_id=world.lab.id, user_id=student.id, points=2.0))
    session.flush()
    rows = {r.student.id: r for r in lab_roster(session, lab=world.lab)}
    mine, theirs = rows[student.id], rows[other.id]
    assert mine.deadline.extended and not theirs.deadline.extended
    assert (mine.cell.counted, mine.cell.rubric, mine.cell.score) == (None, 2.0, 2.0)
    assert theirs.late and theirs.cell.days_late == 1 and theirs.cell.score == 7.5
    assert [r.student.id for r in lab_roster(session, lab=world.lab, late=True)] == [other.id]
    assert [r.student.id for r in lab_roster(session, lab=world.lab, extension=True)] == [
        student.id
    ]


def test_a_team_name_is_this_labs_team_of_now(session: Session, world: World) -> None:
    from app.courses.service import add_lab
    from app.teams.service import remove_member

    world.lab.team_size = 2
    other_lab = add_lab(session, course=world.course, ref="hadamard")
    other_lab.team_size = 2
    for lab, name in ((world.lab, "Here"), (other_lab, "There")):
        world.pair_up(session, now=T0, name=name, lab=lab)
    remove_member(session, lab=world.lab, user=world.other_student.user, now=T0)
    session.flush()
    rows = {r.student.id: r.team for r in lab_roster(session, lab=world.lab)}
    assert rows[world.student.user.id] == "Here" and rows[world.other_student.user.id] == ""


def test_the_zip_goes_on_past_a_student_with_nothing_and_uses_one_line_ending(
    session: Session, world: World
) -> None:
    _ensure_student(session, world, "aaa-nothing-yet")
    make_submission(session, user=world.student.user, lab=world.lab, score=1.0, created_at=T0)
    session.flush()
    out = io.BytesIO()
    counted_sources_zip(session, lab=world.lab, now=T0, out=out)
    archive = zipfile.ZipFile(io.BytesIO(out.getvalue()))
    manifest = archive.read(f"{world.lab.slug}/manifest.csv")
    assert b"\r" not in manifest and manifest.count(b"\n") == 2
    assert _safe("Ada.Lovelace") == "Ada.Lovelace"


def test_both_gradebook_layouts_are_whole_and_use_one_line_ending(
    session: Session, world: World
) -> None:
    from app.gradebook.service import canvas_csv, gradebook_csv

    world.course.late_days = 1  # one late day is a budget: its columns are there
    make_submission(session, user=world.student.user, lab=world.lab, score=4.0, created_at=T0)
    session.flush()
    book, canvas = (
        gradebook_csv(session, course=world.course),
        canvas_csv(session, course=world.course),
    )
    assert "\r" not in book and "\r" not in canvas
    header = next(csv.reader(io.StringIO(book)))
    assert f"{world.lab.slug}_late_days" in header and header[-2:] == ["late_days_left", "total"]
    rows = list(csv.reader(io.StringIO(canvas)))
    mine = next(r for r in rows if r[3] == world.student.email)
    assert mine == [world.student.user.name, "", "", world.student.email, "", "4"]
