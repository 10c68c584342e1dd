"""Counting scores per lab (best or last submission) and writing the gradebook CSV."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.courses.models import Course, Enrollment, Lab, Role, ScorePolicy
from app.courses.service import labs_of
from app.submissions.models import Submission
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


@dataclass
class GradebookRow:
    user: User
    cells: list[Counted | None]

    @property
    def total(self) -> float:
        return sum(c.score for c in self.cells if c is not None)


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
            cells=[counted_submission(lab, by_key.get((user.id, lab.id), [])) for lab in labs],
        )
        for user in students
    ]
    return labs, rows


def best_scores(session: Session, *, user: User, labs: list[Lab]) -> dict[int, Counted | None]:
    """For a student's course page: each lab's counted score."""
    subs: dict[int, list[Submission]] = {lab.id: [] for lab in labs}
    if labs:
        for sub in session.scalars(
            select(Submission).where(
                Submission.user_id == user.id, Submission.lab_id.in_(list(subs))
            )
        ):
            subs[sub.lab_id].append(sub)
    return {lab.id: counted_submission(lab, subs[lab.id]) for lab in labs}


def _cell(text: str) -> str:
    # A spreadsheet would run a cell that starts with = + - @ as a formula.
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def _number(value: float) -> str:
    return f"{value:g}"


def gradebook_csv(session: Session, *, course: Course) -> str:
    """Columns: student_id, name, email, then `<lab>` and `<lab>_late` per lab, then total."""
    labs, rows = gradebook(session, course=course)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    header = ["student_id", "name", "email"]
    for lab in labs:
        header += [lab.slug, f"{lab.slug}_late"]
    writer.writerow([*header, "total"])
    for row in rows:
        line: list[str] = [str(row.user.id), _cell(row.user.name), _cell(row.user.email)]
        for cell in row.cells:
            if cell is None:
                line += ["", ""]
            else:
                line += [_number(cell.score), "1" if cell.late else "0"]
        writer.writerow([*line, _number(row.total)])
    return out.getvalue()
