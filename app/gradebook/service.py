"""Counting scores per lab (best or last submission) and writing the gradebook CSV.

A cell of the gradebook is a `LabCell`: the counted submission (its score and late flag, the
flag following the due date in force for the student, extensions included) and how many of
the student's submissions to the lab are still being graded, so a grade that may still change
is never shown as a plain 0 or blank.

The gradebook reads one row per submission, and only the columns it counts with (never a
source, log or report), in one query over the course's students; it walks that query's rows
student by student, so it holds one student's submissions at a time, whatever the course size.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import IO, NamedTuple

from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from app.courses.models import Course, Enrollment, Lab, Role, ScorePolicy
from app.courses.service import labs_of
from app.submissions.models import Status, Submission
from app.users.models import User

# Rows fetched from the database at a time while the gradebook is walked.
BATCH_ROWS = 2000

# The columns counting reads, in the order of `Scored`.
SCORED_COLUMNS = (
    Submission.id,
    Submission.lab_id,
    Submission.score,
    Submission.late,
    Submission.created_at,
    Submission.graded_at,
    Submission.status,
)


class Scored(NamedTuple):
    """What counting needs of one submission."""

    submission_id: int
    lab_id: int
    score: float | None
    late: bool
    created_at: datetime
    graded_at: datetime | None
    status: str

    @classmethod
    def of(cls, submission: Submission) -> Scored:
        return cls(
            submission.id,
            submission.lab_id,
            submission.score,
            submission.late,
            submission.created_at,
            submission.graded_at,
            submission.status,
        )


@dataclass(frozen=True)
class Counted:
    score: float
    late: bool
    submission_id: int


def counted_submission(lab: Lab, submissions: Iterable[Scored]) -> Counted | None:
    """The submission that counts under the lab's policy; `submissions` in any order."""
    # A submission counts once it has a verdict (`graded_at`; a compile error scores zero).
    # It keeps that verdict while a regrade is under way or if the regrade fails on our side,
    # so a regrade never blanks a student's grade; never-graded ones (in progress, waiting for
    # a GPU, `error`) do not count yet.
    scored = [s for s in submissions if s.graded_at is not None]
    if not scored:
        return None
    if lab.score_policy == ScorePolicy.last.value:
        chosen = max(scored, key=lambda s: (s.created_at, s.submission_id))
    else:  # best; ties go to the earlier one, which is the on-time one when one is late
        chosen = max(
            scored, key=lambda s: (s.score or 0.0, -s.created_at.timestamp(), -s.submission_id)
        )
    return Counted(score=chosen.score or 0.0, late=chosen.late, submission_id=chosen.submission_id)


@dataclass(frozen=True)
class Student:
    """A gradebook row's student: the three columns read of the user."""

    id: int
    name: str
    email: str

    @property
    def display_name(self) -> str:
        return self.name or self.email


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


def is_pending(submission: Submission | Scored) -> bool:
    return not Status(submission.status).is_final


def lab_cell(lab: Lab, submissions: list[Scored]) -> LabCell:
    """The counted submission and the pending count; `submissions` are one student's."""
    return LabCell(
        counted=counted_submission(lab, submissions),
        pending=sum(1 for s in submissions if is_pending(s)),
    )


@dataclass
class GradebookRow:
    user: Student
    cells: list[LabCell]

    @property
    def total(self) -> float:
        return sum(c.counted.score for c in self.cells if c.counted is not None)

    @property
    def pending(self) -> int:
        return sum(c.pending for c in self.cells)


def gradebook_rows(session: Session, *, course: Course, labs: list[Lab]) -> Iterator[GradebookRow]:
    """One row per enrolled student, by email, walked from a single query."""
    of_these_labs = and_(
        Submission.user_id == User.id,
        Submission.lab_id.in_([lab.id for lab in labs] or [-1]),
    )
    query = (
        select(User.id, User.name, User.email, *SCORED_COLUMNS)
        .join(Enrollment, Enrollment.user_id == User.id)
        .outerjoin(Submission, of_these_labs)
        .where(Enrollment.course_id == course.id, Enrollment.role == Role.student.value)
        .order_by(User.email, User.id)
        .execution_options(yield_per=BATCH_ROWS)
    )
    for (user_id, name, email), rows in itertools.groupby(
        session.execute(query), key=lambda row: (row[0], row[1], row[2])
    ):
        by_lab: dict[int, list[Scored]] = {}
        for row in rows:
            if row[3] is not None:
                by_lab.setdefault(row[4], []).append(Scored._make(row[3:]))
        yield GradebookRow(
            user=Student(id=user_id, name=name, email=email),
            cells=[lab_cell(lab, by_lab.get(lab.id, [])) for lab in labs],
        )


def gradebook(session: Session, *, course: Course) -> tuple[list[Lab], list[GradebookRow]]:
    """For the gradebook page: the labs in column order and every student's row."""
    labs = labs_of(session, course=course)
    return labs, list(gradebook_rows(session, course=course, labs=labs))


def best_scores(session: Session, *, user: User, labs: list[Lab]) -> dict[int, LabCell]:
    """For a student's course page: each lab's counted score and pending count."""
    subs: dict[int, list[Scored]] = {lab.id: [] for lab in labs}
    if labs:
        for row in session.execute(
            select(*SCORED_COLUMNS).where(
                Submission.user_id == user.id, Submission.lab_id.in_(list(subs))
            )
        ):
            subs[row[1]].append(Scored._make(row))
    return {lab.id: lab_cell(lab, subs[lab.id]) for lab in labs}


def _cell(text: str) -> str:
    # A spreadsheet would run a cell that starts with = + - @ as a formula.
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def _number(value: float) -> str:
    return f"{value:g}"


def write_gradebook_csv(session: Session, *, course: Course, out: IO[str]) -> None:
    """Columns: student_id, name, email, then `<lab>`, `<lab>_late` and `<lab>_pending` per
    lab, then total. `<lab>_pending` counts the student's submissions still being graded: the
    score beside it may still change (empty score and pending > 0: the first verdict is on its
    way)."""
    labs = labs_of(session, course=course)
    writer = csv.writer(out, lineterminator="\n")
    header = ["student_id", "name", "email"]
    for lab in labs:
        header += [lab.slug, f"{lab.slug}_late", f"{lab.slug}_pending"]
    writer.writerow([*header, "total"])
    for row in gradebook_rows(session, course=course, labs=labs):
        line: list[str] = [str(row.user.id), _cell(row.user.name), _cell(row.user.email)]
        for cell in row.cells:
            if cell.counted is None:
                line += ["", ""]
            else:
                line += [_number(cell.counted.score), "1" if cell.counted.late else "0"]
            line.append(str(cell.pending))
        writer.writerow([*line, _number(row.total)])


def write_canvas_csv(session: Session, *, course: Course, out: IO[str]) -> None:
    """The gradebook in the layout Canvas's gradebook import reads: `Student, ID, SIS User ID,
    SIS Login ID, Section`, one column per lab named by its title, and a `Points Possible` row.
    The email goes in SIS Login ID (Canvas matches students by it where logins are emails);
    Canvas's own ids are unknown here and left empty. A lab with no counted score yet, still
    pending or not, is an empty cell, which Canvas's import leaves as it was."""
    labs = labs_of(session, course=course)
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
    for row in gradebook_rows(session, course=course, labs=labs):
        scores = ["" if c.counted is None else _number(c.counted.score) for c in row.cells]
        writer.writerow([_cell(row.user.display_name), "", "", _cell(row.user.email), "", *scores])


def gradebook_csv(session: Session, *, course: Course) -> str:
    out = io.StringIO()
    write_gradebook_csv(session, course=course, out=out)
    return out.getvalue()


def canvas_csv(session: Session, *, course: Course) -> str:
    out = io.StringIO()
    write_canvas_csv(session, course=course, out=out)
    return out.getvalue()
