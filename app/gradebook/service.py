"""Counting scores per lab (best or last submission) and writing the gradebook CSV.

A cell of the gradebook is a `LabCell`: the counted submission (its score and late flag, the
flag following the due date in force for the student, extensions included) and how many of
the student's submissions to the lab are still being graded, so a grade that may still change
is never shown as a plain 0 or blank.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.courses.models import Course, Enrollment, Lab, Role, ScorePolicy
from app.courses.service import labs_of
from app.submissions.models import Status, Submission
from app.users.models import User


@dataclass(frozen=True)
class Counted:
    score: float
    late: bool
    submission_id: int


def counted_submission(lab: Lab, submissions: list[Submission]) -> Counted | None:
    """The submission that counts under the lab's policy; `submissions` in any order."""
    # A submission counts once it has a verdict (`graded_at`; a compile error scores zero).
    # It keeps that verdict while a regrade is under way or if the regrade fails on our side,
    # so a regrade never blanks a student's grade; never-graded ones (in progress, waiting for
    # a GPU, `error`) do not count yet.
    scored = [s for s in submissions if s.graded_at is not None]
    if not scored:
        return None
    if lab.score_policy == ScorePolicy.last.value:
        chosen = max(scored, key=lambda s: (s.created_at, s.id))
    else:  # best; ties go to the earlier one, which is the on-time one when one is late
        chosen = max(scored, key=lambda s: (s.score or 0.0, -s.created_at.timestamp(), -s.id))
    return Counted(score=chosen.score or 0.0, late=chosen.late, submission_id=chosen.id)


@dataclass(frozen=True)
class LabCell:
    """One student's standing in one lab."""

    counted: Counted | None
    # Their submissions to the lab still on the way to a verdict (queued, compiling, waiting
    # for a GPU, running; a regrade too): the counted score may still change.
    pending: int = 0

    @property
    def score(self) -> float | None:
        return None if self.counted is None else self.counted.score


def is_pending(submission: Submission) -> bool:
    return not Status(submission.status).is_final


def lab_cell(lab: Lab, submissions: list[Submission]) -> LabCell:
    """The counted submission and the pending count; `submissions` are one student's."""
    return LabCell(
        counted=counted_submission(lab, submissions),
        pending=sum(1 for s in submissions if is_pending(s)),
    )


@dataclass
class GradebookRow:
    user: User
    cells: list[LabCell]

    @property
    def total(self) -> float:
        return sum(c.counted.score for c in self.cells if c.counted is not None)

    @property
    def pending(self) -> int:
        return sum(c.pending for c in self.cells)


def gradebook(session: Session, *, course: Course) -> tuple[list[Lab], list[GradebookRow]]:
    labs = labs_of(session, course=course)
    students = list(
        session.scalars(
            select(User)
            .join(Enrollment, Enrollment.user_id == User.id)
            .where(Enrollment.course_id == course.id, Enrollment.role == Role.student.value)
            .order_by(User.email)
        )
    )
    by_key: dict[tuple[int, int], list[Submission]] = {}
    if labs and students:
        for sub in session.scalars(
            select(Submission).where(
                Submission.lab_id.in_([lab.id for lab in labs]),
                Submission.user_id.in_([u.id for u in students]),
            )
        ):
            by_key.setdefault((sub.user_id, sub.lab_id), []).append(sub)
    rows = [
        GradebookRow(
            user=user,
            cells=[lab_cell(lab, by_key.get((user.id, lab.id), [])) for lab in labs],
        )
        for user in students
    ]
    return labs, rows


def best_scores(session: Session, *, user: User, labs: list[Lab]) -> dict[int, LabCell]:
    """For a student's course page: each lab's counted score and pending count."""
    subs: dict[int, list[Submission]] = {lab.id: [] for lab in labs}
    if labs:
        for sub in session.scalars(
            select(Submission).where(
                Submission.user_id == user.id, Submission.lab_id.in_(list(subs))
            )
        ):
            subs[sub.lab_id].append(sub)
    return {lab.id: lab_cell(lab, subs[lab.id]) for lab in labs}


def _cell(text: str) -> str:
    # A spreadsheet would run a cell that starts with = + - @ as a formula.
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def _number(value: float) -> str:
    return f"{value:g}"


def gradebook_csv(session: Session, *, course: Course) -> str:
    """Columns: student_id, name, email, then `<lab>`, `<lab>_late` and `<lab>_pending` per
    lab, then total. `<lab>_pending` counts the student's submissions still being graded: the
    score beside it may still change (empty score and pending > 0: the first verdict is on its
    way)."""
    labs, rows = gradebook(session, course=course)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    header = ["student_id", "name", "email"]
    for lab in labs:
        header += [lab.slug, f"{lab.slug}_late", f"{lab.slug}_pending"]
    writer.writerow([*header, "total"])
    for row in rows:
        line: list[str] = [str(row.user.id), _cell(row.user.name), _cell(row.user.email)]
        for cell in row.cells:
            if cell.counted is None:
                line += ["", ""]
            else:
                line += [_number(cell.counted.score), "1" if cell.counted.late else "0"]
            line.append(str(cell.pending))
        writer.writerow([*line, _number(row.total)])
    return out.getvalue()


def canvas_csv(session: Session, *, course: Course) -> str:
    """The gradebook in the layout Canvas's gradebook import reads: `Student, ID, SIS User ID,
    SIS Login ID, Section`, one column per lab named by its title, and a `Points Possible` row.
    The email goes in SIS Login ID (Canvas matches students by it where logins are emails);
    Canvas's own ids are unknown here and left empty. A lab with no counted score yet, still
    pending or not, is an empty cell, which Canvas's import leaves as it was."""
    labs, rows = gradebook(session, course=course)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "Student",
            "ID",
            "SIS User ID",
            "SIS Login ID",
            "Section",
            *[_cell(lab.title) for lab in labs],
        ]
    )
    writer.writerow(["Points Possible", "", "", "", "", *[_number(lab.max_score) for lab in labs]])
    for row in rows:
        scores = ["" if c.counted is None else _number(c.counted.score) for c in row.cells]
        writer.writerow(
            [_cell(row.user.name or row.user.email), "", "", _cell(row.user.email), "", *scores]
        )
    return out.getvalue()
