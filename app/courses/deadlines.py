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

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.courses.models import Extension, Lab, LatePolicy


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
