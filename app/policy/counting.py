"""What counts: the submission that counts for a student in a lab, and their standing there.

A cell (`LabCell`) is the counted submission (its score and late flag, the flag following the
due date in force for the student, extensions included) and how many of the student's
submissions to the lab are still being graded, so a grade that may still change is never shown
as a plain 0 or blank. The course's policies enter here: a submission counts for every member of
the team it was made for (app.submissions.credits); its score carries the staff's points
adjustment (an accepted regrade request); late days the student spent on it (a `LateDayCharge`,
written when it came to count) cover its lateness, and each late day left uncovered costs the
lab's late penalty; rubric points the staff gave are added on top.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.courses.deadlines import deadline_from
from app.courses.models import Extension, Lab, ScorePolicy
from app.latedays.models import LateDayCharge
from app.rubric.models import RubricScore
from app.submissions.credits import credited_pairs
from app.submissions.models import Submission
from app.submissions.service import FINAL
from app.users.models import User

# The columns counting reads, in the order of `Scored`.
SCORED_COLUMNS = (
    Submission.id,
    Submission.lab_id,
    Submission.score,
    Submission.late,
    Submission.created_at,
    # Whether it has a verdict, not when: counting needs no more, and a datetime costs a
    # conversion per row (the gradebook reads a row per submission of the course).
    Submission.graded_at.is_not(None),
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
    graded_at: datetime | bool | None  # truthy once it has a verdict
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


class Counted(NamedTuple):
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
    scored = [s for s in submissions if s.graded_at]
    if not scored:
        return None
    if lab.score_policy == ScorePolicy.last.value:
        chosen = max(scored, key=lambda s: (s.created_at, s.submission_id))
        points = chosen.adjusted_score
    else:  # best; ties go to the earlier one, which is the on-time one when one is late
        # A loop, not max() with a key: the gradebook runs this for every cell of a course.
        chosen, points = scored[0], scored[0].adjusted_score
        for s in scored[1:]:
            score = s.adjusted_score
            if score > points or (
                score == points
                and (s.created_at, s.submission_id) < (chosen.created_at, chosen.submission_id)
            ):
                chosen, points = s, score
    return Counted(
        score=points,
        late=chosen.late,
        submission_id=chosen.submission_id,
        created_at=chosen.created_at,
        author_id=chosen.author_id,
    )


class LabCell(NamedTuple):
    """One student's standing in one lab (a named tuple: the gradebook makes one per student
    and lab, and a tuple is made fastest)."""

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
    extension: Extension | None,
    charge: LateDayCharge | None,
    rubric: float | None,
) -> LabCell:
    """The cell with the student's late days, the lab's late penalty and rubric points: late
    means late by more days than the student spent on it."""
    counted = cell.counted
    if counted is None or counted.created_at is None:
        return cell if rubric is None and cell.rubric is None else cell._replace(rubric=rubric)
    if user_id == counted.author_id and not counted.late:
        # The author's on-time submission (most cells): nothing late, nothing spent.
        return LabCell(counted=counted, pending=cell.pending, rubric=rubric)
    deadline = deadline_from(lab, extension)
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
        counted=counted._replace(late=late),
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

    def cell(self, lab: Lab, user_id: int, cell: LabCell, *, lab_id: int | None = None) -> LabCell:
        """`cell` as lab_cell made it, with the student's policies; `lab_id`: the lab's id,
        where the caller has it at hand (the gradebook's walk, which makes every cell)."""
        key = (lab.id if lab_id is None else lab_id, user_id)
        rubric = self.rubric.get(key)
        counted = cell.counted
        if rubric is None and (
            counted is None or (counted.author_id == user_id and not counted.late)
        ):
            return cell  # nothing counted, or its author's on-time submission: as it is
        return with_policies(
            cell,
            lab=lab,
            user_id=user_id,
            extension=self.extensions.get(key),
            charge=self.charges.get(key),
            rubric=rubric,
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


def lab_cell(lab: Lab, submissions: list[Scored]) -> LabCell:
    """The counted submission and the pending count; `submissions` are one student's."""
    return LabCell(
        counted=counted_submission(lab, submissions),
        pending=sum(1 for s in submissions if s.status not in FINAL),  # is_pending, inlined
    )


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
