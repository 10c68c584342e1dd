"""The gradebook: every student's counted score per lab (app.policy.counting), as a page and as
CSV (its own layout, and the one Canvas imports).

The gradebook reads one row per submission, and only the columns it counts with (never a
source, log or report), in one query over the course's students (and one for the team
submissions credited to their other members); it walks that query's rows student by student,
so it holds one student's submissions at a time, whatever the course size.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.csv_out import SafeCsvWriter
from app.courses.models import Course, Enrollment, Lab, Role
from app.courses.service import labs_of
from app.latedays.service import late_days_left
from app.policy.counting import (
    SCORED_COLUMNS,
    LabCell,
    Scored,
    lab_cell,
    policy_inputs,
)
from app.rubric.service import points_possible
from app.submissions.models import Submission
from app.teams.models import SubmissionCredit
from app.users.models import User
from app.users.service import Student

# Rows fetched from the database at a time while the gradebook is walked.
BATCH_ROWS = 2000


@dataclass
class GradebookRow:
    user: Student
    cells: list[LabCell]

    @property
    def total(self) -> float:
        return sum(c.score for c in self.cells if c.score is not None)

    @property
    def pending(self) -> int:
        return sum(c.pending for c in self.cells)


def gradebook_rows(session: Session, *, course: Course, labs: list[Lab]) -> Iterator[GradebookRow]:
    """One row per enrolled student, by email, walked from a single query of their own
    submissions; a team's submission also appears in the row of every other student it was
    made for (read apart: a team's credits are few beside the submissions)."""
    inputs = policy_inputs(session, labs=labs)
    lab_ids = [lab.id for lab in labs]
    credited = _credited_to(session, lab_ids=lab_ids)
    query = (
        select(User.id, User.name, User.email, *SCORED_COLUMNS)
        .join(Enrollment, Enrollment.user_id == User.id)
        .outerjoin(
            Submission,
            (Submission.user_id == User.id) & Submission.lab_id.in_(lab_ids or [-1]),
        )
        .where(Enrollment.course_id == course.id, Enrollment.role == Role.student.value)
        .order_by(User.email, User.id)
        .execution_options(yield_per=BATCH_ROWS)
    )
    columns = list(zip(lab_ids, labs, strict=True))
    for (user_id, name, email), rows in itertools.groupby(
        session.execute(query), key=lambda row: (row[0], row[1], row[2])
    ):
        by_lab: dict[int, list[Scored]] = {}
        for row in rows:
            if row[3] is not None:
                by_lab.setdefault(row[4], []).append(Scored._make(row[3:]))
        for scored in credited.get(user_id, ()):
            by_lab.setdefault(scored.lab_id, []).append(scored)
        yield GradebookRow(
            user=Student(id=user_id, name=name, email=email),
            cells=[
                inputs.cell(lab, user_id, lab_cell(lab, by_lab.get(lab_id, [])), lab_id=lab_id)
                for lab_id, lab in columns
            ],
        )


def _credited_to(session: Session, *, lab_ids: list[int]) -> dict[int, list[Scored]]:
    """The submissions of these labs that count for a student other than their author (a
    team's, for its other members of that moment), by student."""
    credited: dict[int, list[Scored]] = {}
    for user_id, *row in session.execute(
        select(SubmissionCredit.user_id, *SCORED_COLUMNS)
        .join(Submission, Submission.id == SubmissionCredit.submission_id)
        .where(Submission.lab_id.in_(lab_ids or [-1]))
    ):
        credited.setdefault(user_id, []).append(Scored._make(row))
    return credited


def gradebook(session: Session, *, course: Course) -> tuple[list[Lab], list[GradebookRow]]:
    """For the gradebook page: the labs in column order and every student's row."""
    labs = labs_of(session, course=course)
    return labs, list(gradebook_rows(session, course=course, labs=labs))


def _number(value: float) -> str:
    return f"{value:g}"


def write_gradebook_csv(session: Session, *, course: Course, out: IO[str]) -> None:
    """Columns: student_id, name, email, then `<lab>`, `<lab>_late` and `<lab>_pending` per
    lab (and `<lab>_late_days`, with `late_days_left` at the end, where the course gives late
    days), then total. `<lab>_pending` counts the student's submissions still being graded: the
    score beside it may still change (empty score and pending > 0: the first verdict is on its
    way)."""
    labs = labs_of(session, course=course)
    budget = course.late_days > 0
    left = late_days_left(session, course=course) if budget else {}
    writer = SafeCsvWriter(out)
    header = ["student_id", "name", "email"]
    for lab in labs:
        header += [lab.slug, f"{lab.slug}_late", f"{lab.slug}_pending"]
        if budget:
            header.append(f"{lab.slug}_late_days")
    if budget:
        header.append("late_days_left")
    writer.writerow([*header, "total"])
    for row in gradebook_rows(session, course=course, labs=labs):
        line: list[str] = [str(row.user.id), row.user.name, row.user.email]
        total = 0.0
        for cell in row.cells:
            score = cell.score  # a property that works it out: read once
            if score is None:
                line.append("")
            else:
                line.append(_number(score))
                total += score
            line.append("" if cell.counted is None else ("1" if cell.late else "0"))
            line.append(str(cell.pending))
            if budget:
                line.append(str(cell.late_days))
        if budget:
            line.append(str(left.get(row.user.id, course.late_days)))
        writer.writerow([*line, _number(total)])  # row.total, summed on the way


def write_canvas_csv(session: Session, *, course: Course, out: IO[str]) -> None:
    """The gradebook in the layout Canvas's gradebook import reads: `Student, ID, SIS User ID,
    SIS Login ID, Section`, one column per lab named by its title, and a `Points Possible` row.
    The email goes in SIS Login ID (Canvas matches students by it where logins are emails);
    Canvas's own ids are unknown here and left empty. A lab with no counted score yet, still
    pending or not, is an empty cell, which Canvas's import leaves as it was. Scores are the
    gradebook's: late penalties applied, rubric points added (and in Points Possible)."""
    labs = labs_of(session, course=course)
    writer = SafeCsvWriter(out)
    writer.writerow(
        [
            "Student",
            "ID",
            "SIS User ID",
            "SIS Login ID",
            "Section",
            *[lab.title for lab in labs],
        ]
    )
    most = points_possible(session, labs=labs)
    possible = [_number(most[lab.id]) for lab in labs]
    writer.writerow(["Points Possible", "", "", "", "", *possible])
    for row in gradebook_rows(session, course=course, labs=labs):
        scores = ["" if c.score is None else _number(c.score) for c in row.cells]
        writer.writerow([row.user.display_name, "", "", row.user.email, "", *scores])


def gradebook_csv(session: Session, *, course: Course) -> str:
    out = io.StringIO()
    write_gradebook_csv(session, course=course, out=out)
    return out.getvalue()


def canvas_csv(session: Session, *, course: Course) -> str:
    out = io.StringIO()
    write_canvas_csv(session, course=course, out=out)
    return out.getvalue()
