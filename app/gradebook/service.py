"""Counting scores per lab (best or last submission) and writing the gradebook CSV.

The gradebook reads one row per graded submission, and only the columns it counts with (never
a source, log or report), in one query over the course's students; it walks that query's rows
student by student, so it holds one student's submissions at a time, whatever the course size.
"""

from __future__ import annotations

import csv
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import IO, NamedTuple

from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from app.courses.models import Course, Enrollment, Lab, Role, ScorePolicy
from app.courses.service import labs_of
from app.submissions.models import Submission
from app.users.models import User

# Rows fetched from the database at a time while the gradebook is walked.
BATCH_ROWS = 2000


class Scored(NamedTuple):
    """What counting needs of one graded submission."""

    submission_id: int
    lab_id: int
    score: float | None
    late: bool
    created_at: datetime


@dataclass(frozen=True)
class Counted:
    score: float
    late: bool
    submission_id: int


def counted_submission(lab: Lab, submissions: Iterable[Scored]) -> Counted | None:
    """The submission that counts under the lab's policy; graded ones only, in any order."""
    # A submission counts once it has a verdict (`graded_at`; a compile error scores zero).
    # It keeps that verdict while a regrade is under way or if the regrade fails on our side,
    # so a regrade never blanks a student's grade; never-graded ones (in progress, waiting for
    # a GPU, `error`) do not count yet. The queries below keep only graded ones.
    scored = list(submissions)
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
    id: int
    name: str
    email: str

    @property
    def display_name(self) -> str:
        return self.name or self.email


@dataclass
class GradebookRow:
    user: Student
    cells: list[Counted | None]

    @property
    def total(self) -> float:
        return sum(c.score for c in self.cells if c is not None)


def gradebook_rows(session: Session, *, course: Course, labs: list[Lab]) -> Iterator[GradebookRow]:
    """One row per enrolled student, by email, walked from a single query."""
    graded_here = and_(
        Submission.user_id == User.id,
        Submission.lab_id.in_([lab.id for lab in labs] or [-1]),
        Submission.graded_at.is_not(None),
    )
    query = (
        select(
            User.id,
            User.name,
            User.email,
            Submission.id,
            Submission.lab_id,
            Submission.score,
            Submission.late,
            Submission.created_at,
        )
        .join(Enrollment, Enrollment.user_id == User.id)
        .outerjoin(Submission, graded_here)
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
                by_lab.setdefault(row[4], []).append(Scored(*row[3:]))
        yield GradebookRow(
            user=Student(id=user_id, name=name, email=email),
            cells=[counted_submission(lab, by_lab.get(lab.id, [])) for lab in labs],
        )


def gradebook(session: Session, *, course: Course) -> tuple[list[Lab], list[GradebookRow]]:
    """For the gradebook page: the labs in column order and every student's row."""
    labs = labs_of(session, course=course)
    return labs, list(gradebook_rows(session, course=course, labs=labs))


def best_scores(session: Session, *, user: User, labs: list[Lab]) -> dict[int, Counted | None]:
    """For a student's course page: each lab's counted score."""
    subs: dict[int, list[Scored]] = {lab.id: [] for lab in labs}
    if labs:
        for row in session.execute(
            select(
                Submission.id,
                Submission.lab_id,
                Submission.score,
                Submission.late,
                Submission.created_at,
            ).where(
                Submission.user_id == user.id,
                Submission.lab_id.in_(list(subs)),
                Submission.graded_at.is_not(None),
            )
        ):
            subs[row[1]].append(Scored(*row))
    return {lab.id: counted_submission(lab, subs[lab.id]) for lab in labs}


def _cell(text: str) -> str:
    # A spreadsheet would run a cell that starts with = + - @ as a formula.
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def _number(value: float) -> str:
    return f"{value:g}"


def write_gradebook_csv(session: Session, *, course: Course, out: IO[str]) -> None:
    """Columns: student_id, name, email, then `<lab>` and `<lab>_late` per lab, then total."""
    labs = labs_of(session, course=course)
    writer = csv.writer(out, lineterminator="\n")
    header = ["student_id", "name", "email"]
    for lab in labs:
        header += [lab.slug, f"{lab.slug}_late"]
    writer.writerow([*header, "total"])
    for row in gradebook_rows(session, course=course, labs=labs):
        line: list[str] = [str(row.user.id), _cell(row.user.name), _cell(row.user.email)]
        for cell in row.cells:
            if cell is None:
                line += ["", ""]
            else:
                line += [_number(cell.score), "1" if cell.late else "0"]
        writer.writerow([*line, _number(row.total)])


def gradebook_csv(session: Session, *, course: Course) -> str:
    import io

    out = io.StringIO()
    write_gradebook_csv(session, course=course, out=out)
    return out.getvalue()
