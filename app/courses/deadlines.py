"""Due dates as each student sees them: the lab's, or the extension the staff granted them.

Lateness is a fact about a submission's time and the due date in force for its author, so the
stored `Submission.late` flags are recomputed whenever either changes (a lab's due date is
edited, an extension granted or revoked): every reader (pages, API, gradebook) then agrees.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.courses.models import Extension, Lab, LatePolicy
from app.submissions.models import Submission


@dataclass(frozen=True)
class Deadline:
    """The due date in force for one student: the lab's, or their extension's."""

    due_at: datetime | None
    lab_due_at: datetime | None
    extended: bool

    def is_late(self, at: datetime) -> bool:
        return self.due_at is not None and at > self.due_at

    def days_late(self, at: datetime) -> int:
        """Started days past the due date (a minute late is one late day); 0 when on time."""
        if self.due_at is None or at <= self.due_at:
            return 0
        return math.ceil((at - self.due_at) / timedelta(days=1))


def deadline_for(session: Session, *, lab: Lab, user_id: int) -> Deadline:
    extension = session.scalar(
        select(Extension).where(Extension.lab_id == lab.id, Extension.user_id == user_id)
    )
    return deadline_from(lab, extension)


def deadline_from(lab: Lab, extension: Extension | None) -> Deadline:
    if extension is not None and lab.due_at is not None:
        return Deadline(due_at=extension.due_at, lab_due_at=lab.due_at, extended=True)
    return Deadline(due_at=lab.due_at, lab_due_at=lab.due_at, extended=False)


def extensions_by_user(session: Session, *, lab: Lab) -> dict[int, Extension]:
    rows = session.scalars(select(Extension).where(Extension.lab_id == lab.id))
    return {row.user_id: row for row in rows}


class Availability(enum.StrEnum):
    open = "open"
    not_released = "not_released"
    closed = "closed"  # past the due date in force, and the lab refuses late work
    archived = "archived"


@dataclass(frozen=True)
class LabState:
    availability: Availability
    # When it opens (not released) or closed (past due, or when the staff removed it).
    at: datetime | None
    late_now: bool  # open, but a submission now would be marked late

    @property
    def accepts(self) -> bool:
        return self.availability is Availability.open


def lab_state(
    lab: Lab, deadline: Deadline, *, now: datetime, staff: bool, late_days: int = 0
) -> LabState:
    """What a submission made now would meet. Staff try labs out before release and after the
    due date, so only archiving closes a lab to them. `late_days`: how many the student could
    still spend on this lab; a lab that refuses late work takes it that many days longer."""
    if lab.archived_at is not None:
        return LabState(Availability.archived, lab.archived_at, False)
    late = deadline.is_late(now)
    if staff:
        return LabState(Availability.open, None, late)
    if lab.release_at is not None and now < lab.release_at:
        return LabState(Availability.not_released, lab.release_at, False)
    if late and lab.late_policy == LatePolicy.refuse.value:
        if deadline.days_late(now) <= late_days:
            return LabState(Availability.open, None, True)
        assert deadline.due_at is not None
        return LabState(Availability.closed, deadline.due_at + timedelta(days=late_days), True)
    return LabState(Availability.open, None, late)


def refresh_late_flags(session: Session, *, lab: Lab, user_id: int | None = None) -> int:
    """Recompute the late flag of the lab's submissions (one author's, if given); return how
    many changed."""
    session.flush()
    extensions = extensions_by_user(session, lab=lab)
    query = select(Submission.id, Submission.user_id, Submission.created_at, Submission.late).where(
        Submission.lab_id == lab.id
    )
    if user_id is not None:
        query = query.where(Submission.user_id == user_id)
    flips: dict[bool, list[int]] = {True: [], False: []}
    for sub_id, author, created_at, was_late in session.execute(query):
        late = deadline_from(lab, extensions.get(author)).is_late(created_at)
        if bool(was_late) != late:
            flips[late].append(sub_id)
    for late, ids in flips.items():
        for start in range(0, len(ids), 500):
            session.execute(
                update(Submission)
                .where(Submission.id.in_(ids[start : start + 500]))
                .values(late=late)
                .execution_options(synchronize_session="fetch")
            )
    return len(flips[True]) + len(flips[False])
