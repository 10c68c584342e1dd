"""Counting scores per lab (best or last submission) and writing the gradebook CSV.

A cell of the gradebook is a `LabCell`: the counted submission (its score and late flag, the
flag following the due date in force for the student, extensions included) and how many of
the student's submissions to the lab are still being graded, so a grade that may still change
is never shown as a plain 0 or blank.

The course's policies (issue 20) enter here: a submission counts for every member of the team
it was made for (`app.submissions.credits.credited_pairs`); its score carries the staff's points
adjustment (an accepted regrade request); late days the student spent on it (a
`LateDayCharge`, written when it came to count) cover its lateness, and each late day left
uncovered costs the lab's late penalty; rubric points the staff gave are added on top.

The gradebook reads one row per submission, and only the columns it counts with (never a
source, log or report), in one query over the course's students; it walks that query's rows
student by student, so it holds one student's submissions at a time, whatever the course size.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import IO, NamedTuple

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.csv_out import SafeCsvWriter
from app.core.database import as_dict
from app.courses.deadlines import Deadline, deadline_from
from app.courses.models import Course, Enrollment, Extension, Lab, Role, ScorePolicy
from app.courses.service import labs_of
from app.latedays.holds import held_beyond_charges
from app.latedays.models import LateDayCharge, LateDayEvent
from app.rubric.models import RubricItem, RubricScore
from app.submissions.credits import credited_pairs
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
    Submission.points_adjustment,
    Submission.user_id,
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
    points_adjustment: float = 0.0
    author_id: int = 0

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
            submission.points_adjustment or 0.0,
            submission.user_id,
        )

    @property
    def adjusted_score(self) -> float:
        return max(0.0, (self.score or 0.0) + (self.points_adjustment or 0.0))


@dataclass(frozen=True)
class Counted:
    score: float  # the autograde with the staff's points adjustment
    late: bool
    submission_id: int
    created_at: datetime | None = None
    author_id: int = 0


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
            scored, key=lambda s: (s.adjusted_score, -s.created_at.timestamp(), -s.submission_id)
        )
    return Counted(
        score=chosen.adjusted_score,
        late=chosen.late,
        submission_id=chosen.submission_id,
        created_at=chosen.created_at,
        author_id=chosen.author_id,
    )


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
    # The staff's rubric points for the student, where any were given (None: none yet).
    rubric: float | None = None
    days_late: int = 0  # started days the counted submission is past the student's due date
    late_days: int = 0  # late days spent on it
    penalty: float = 0.0  # points the lab's late penalty takes for the days not covered

    @property
    def autograde(self) -> float | None:
        return None if self.counted is None else max(0.0, self.counted.score - self.penalty)

    @property
    def score(self) -> float | None:
        if self.counted is None and self.rubric is None:
            return None
        return (self.autograde or 0.0) + (self.rubric or 0.0)

    @property
    def late(self) -> bool:
        return self.counted is not None and self.counted.late


def with_policies(
    cell: LabCell,
    *,
    lab: Lab,
    user_id: int,
    deadline: Deadline,
    charge: LateDayCharge | None,
    rubric: float | None,
) -> LabCell:
    """The cell with the student's late days, the lab's late penalty and rubric points: late
    means late by more days than the student spent on it."""
    counted = cell.counted
    if counted is None or counted.created_at is None:
        return replace(cell, rubric=rubric)
    if user_id == counted.author_id:
        # The stored flag, kept to the author's due date in force, is the truth for them.
        days_late = max(1, deadline.days_late(counted.created_at)) if counted.late else 0
    else:  # a teammate: late by their own due date (their extension, if any)
        days_late = deadline.days_late(counted.created_at)
    spent = 0
    if charge is not None and charge.submission_id == counted.submission_id:
        spent = min(charge.days, days_late)
    uncovered = days_late - spent
    penalty = counted.score * min(1.0, (lab.late_penalty or 0.0) * uncovered / 100.0)
    late = uncovered > 0
    return LabCell(
        counted=replace(counted, late=late),
        pending=cell.pending,
        rubric=rubric,
        days_late=days_late,
        late_days=spent,
        penalty=penalty,
    )


@dataclass
class PolicyInputs:
    """What `with_policies` needs for many students at once, read in a few queries."""

    extensions: dict[tuple[int, int], Extension] = field(default_factory=dict)
    charges: dict[tuple[int, int], LateDayCharge] = field(default_factory=dict)
    rubric: dict[tuple[int, int], float] = field(default_factory=dict)

    def cell(self, lab: Lab, user_id: int, cell: LabCell) -> LabCell:
        key = (lab.id, user_id)
        return with_policies(
            cell,
            lab=lab,
            user_id=user_id,
            deadline=deadline_from(lab, self.extensions.get(key)),
            charge=self.charges.get(key),
            rubric=self.rubric.get(key),
        )


def policy_inputs(
    session: Session, *, labs: list[Lab], user_id: int | None = None, rubric: bool = True
) -> PolicyInputs:
    """Extensions, late-day charges and rubric sums of these labs (of one student, if given);
    `rubric` False leaves rubric points out (a student before the grades' release)."""
    ids = [lab.id for lab in labs] or [-1]
    inputs = PolicyInputs()
    ext = select(Extension).where(Extension.lab_id.in_(ids))
    charges = select(LateDayCharge).where(LateDayCharge.lab_id.in_(ids))
    sums = (
        select(RubricScore.lab_id, RubricScore.user_id, func.sum(RubricScore.points))
        .where(RubricScore.lab_id.in_(ids))
        .group_by(RubricScore.lab_id, RubricScore.user_id)
    )
    if user_id is not None:
        ext = ext.where(Extension.user_id == user_id)
        charges = charges.where(LateDayCharge.user_id == user_id)
        sums = sums.where(RubricScore.user_id == user_id)
    inputs.extensions = {(e.lab_id, e.user_id): e for e in session.scalars(ext)}
    inputs.charges = {(c.lab_id, c.user_id): c for c in session.scalars(charges)}
    if rubric:
        inputs.rubric = {
            (lab_id, uid): float(total) for lab_id, uid, total in session.execute(sums)
        }
    return inputs


def rubric_max(session: Session, *, labs: list[Lab]) -> dict[int, float]:
    """Each lab's rubric points possible (0 where it has no rubric)."""
    totals = dict.fromkeys([lab.id for lab in labs], 0.0)
    for lab_id, total in session.execute(
        select(RubricItem.lab_id, func.sum(RubricItem.max_points))
        .where(RubricItem.lab_id.in_(list(totals) or [-1]))
        .group_by(RubricItem.lab_id)
    ):
        totals[lab_id] = float(total or 0.0)
    return totals


def late_day_sums(session: Session, *, course: Course) -> tuple[dict[int, int], dict[int, int]]:
    """Per student of the course who has any: the staff's adjustments, and the days spent."""
    adjusted = as_dict(
        session.execute(
            select(LateDayEvent.user_id, func.sum(LateDayEvent.delta))
            .where(LateDayEvent.course_id == course.id, LateDayEvent.kind == "adjust")
            .group_by(LateDayEvent.user_id)
        )
    )
    spent = as_dict(
        session.execute(
            select(LateDayCharge.user_id, func.sum(LateDayCharge.days))
            .where(LateDayCharge.course_id == course.id)
            .group_by(LateDayCharge.user_id)
        )
    )
    # A group's sum is never NULL: the summed columns are not nullable.
    return (
        {uid: int(days) for uid, days in adjusted.items()},
        {uid: int(days) for uid, days in spent.items()},
    )


def late_days_left(session: Session, *, course: Course) -> dict[int, int]:
    """Each student's late days left: the course's budget, plus the staff's adjustments, less
    what was spent and what late uploads still being graded hold."""
    adjusted, spent = late_day_sums(session, course=course)
    held = held_beyond_charges(session, course_id=course.id)
    return {
        uid: course.late_days + adjusted.get(uid, 0) - spent.get(uid, 0) - held.get(uid, 0)
        for uid in set(adjusted) | set(spent) | set(held)
    }


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
        return sum(c.score for c in self.cells if c.score is not None)

    @property
    def pending(self) -> int:
        return sum(c.pending for c in self.cells)


def gradebook_rows(session: Session, *, course: Course, labs: list[Lab]) -> Iterator[GradebookRow]:
    """One row per enrolled student, by email, walked from a single query; a team's
    submission appears in the row of every student it was made for."""
    inputs = policy_inputs(session, labs=labs)
    pairs = credited_pairs([lab.id for lab in labs]).subquery()
    query = (
        select(User.id, User.name, User.email, *SCORED_COLUMNS)
        .join(Enrollment, Enrollment.user_id == User.id)
        .outerjoin(pairs, pairs.c.user_id == User.id)
        .outerjoin(Submission, Submission.id == pairs.c.submission_id)
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
            cells=[
                inputs.cell(lab, user_id, lab_cell(lab, by_lab.get(lab.id, []))) for lab in labs
            ],
        )


def gradebook(session: Session, *, course: Course) -> tuple[list[Lab], list[GradebookRow]]:
    """For the gradebook page: the labs in column order and every student's row."""
    labs = labs_of(session, course=course)
    return labs, list(gradebook_rows(session, course=course, labs=labs))


def student_cell(session: Session, *, lab: Lab, user_id: int, rubric: bool = True) -> LabCell:
    """One student's standing in one lab, their team's submissions and late days included."""
    return student_cells(
        session, labs=[lab], user_id=user_id, rubric={lab.id} if rubric else set()
    )[lab.id]


def student_cells(
    session: Session, *, labs: list[Lab], user_id: int, rubric: set[int]
) -> dict[int, LabCell]:
    """Each lab's counted score and pending count for one student; rubric points only for the
    labs in `rubric` (those whose grades the student may see)."""
    subs: dict[int, list[Scored]] = {lab.id: [] for lab in labs}
    if labs:
        pairs = credited_pairs(list(subs), user_id=user_id).subquery()
        for row in session.execute(
            select(*SCORED_COLUMNS).join(pairs, pairs.c.submission_id == Submission.id)
        ):
            subs[row[1]].append(Scored._make(row))
    # No rubric query at all where none is shown (a grading settling its students' cells).
    inputs = policy_inputs(session, labs=labs, user_id=user_id, rubric=bool(rubric))
    inputs.rubric = {key: points for key, points in inputs.rubric.items() if key[0] in rubric}
    return {lab.id: inputs.cell(lab, user_id, lab_cell(lab, subs[lab.id])) for lab in labs}


def best_scores(
    session: Session, *, user: User, labs: list[Lab], rubric: set[int] | None = None
) -> dict[int, LabCell]:
    """For a student's course page: each lab's counted score and pending count (rubric points
    of the labs in `rubric`; all of them when not given)."""
    shown = {lab.id for lab in labs} if rubric is None else rubric
    return student_cells(session, labs=labs, user_id=user.id, rubric=shown)


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
        for cell in row.cells:
            line.append("" if cell.score is None else _number(cell.score))
            line.append("" if cell.counted is None else ("1" if cell.late else "0"))
            line.append(str(cell.pending))
            if budget:
                line.append(str(cell.late_days))
        if budget:
            line.append(str(left.get(row.user.id, course.late_days)))
        writer.writerow([*line, _number(row.total)])


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
    extra = rubric_max(session, labs=labs)
    possible = [_number(lab.max_score + extra[lab.id]) for lab in labs]
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
