"""The rules that move what counts, each a change and its recount: a lab's dates and policies
(due date, release, score and late policy; team size, late-day cap, late penalty, grades'
release) and a student's extension. Each writes its change (the rows are app.courses'), marks
the lab's submissions late or not where a due date moved, and recounts (app.policy.recount) the
students whose count may have moved."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.errors import Invalid
from app.courses.deadlines import deadline_from, extensions_by_user
from app.courses.extensions import delete_extension, write_extension
from app.courses.models import Course, Extension, Lab, LatePolicy, ScorePolicy
from app.courses.service import (
    KEEP,
    Keep,
    update_lab_row,
)
from app.latedays.service import MAX_LATE_DAYS
from app.policy.recount import recount
from app.submissions.models import Submission
from app.teams.service import close_invitations_of_full_teams, set_team_size
from app.users.models import User


def check_late_day_cap(cap: int | None) -> int | None:
    if cap is not None and not (0 <= cap <= MAX_LATE_DAYS):
        raise Invalid(
            f"A lab's late-day cap is 0 to {MAX_LATE_DAYS} days, or none.", field="late_day_cap"
        )
    return cap


def check_late_penalty(percent: float) -> float:
    if not (0 <= percent <= 100):
        raise Invalid(
            "A late penalty is 0 to 100 percent per late day; pick one in between.",
            field="late_penalty",
        )
    return percent


def update_lab_policies(
    session: Session,
    *,
    lab: Lab,
    now: datetime,
    team_size: int | None = None,
    late_day_cap: int | None | Keep = KEEP,
    late_penalty: float | None = None,
    grades_released_at: datetime | None | Keep = KEEP,
) -> list[str]:
    """Change them; a sentence per change. Late days are settled again where what they pay
    for moved (cap, penalty)."""
    changes = []
    if team_size is not None:
        said = set_team_size(lab, team_size)
        if said:
            changes.append(said)
            session.flush()
            closed = close_invitations_of_full_teams(session, lab=lab, now=now)
            if closed:
                n = len(closed)
                changes.append(
                    f"closed {n} open invitation{'s' if n != 1 else ''} to teams full at that size"
                )
    resettle = False
    if not isinstance(late_day_cap, Keep) and late_day_cap != lab.late_day_cap:
        check_late_day_cap(late_day_cap)
        lab.late_day_cap = late_day_cap
        changes.append(
            f"takes at most {late_day_cap} late days"
            if late_day_cap is not None
            else "takes late days up to the course's cap"
        )
        resettle = True
    if late_penalty is not None and late_penalty != lab.late_penalty:
        check_late_penalty(late_penalty)
        lab.late_penalty = float(late_penalty)
        changes.append(f"loses {late_penalty:g}% per late day not covered")
    if not isinstance(grades_released_at, Keep) and grades_released_at != lab.grades_released_at:
        lab.grades_released_at = grades_released_at
        changes.append(
            f"releases its grades at {grades_released_at:%Y-%m-%d %H:%M} UTC"
            if grades_released_at is not None
            else "releases its grades at the default time (the due date and late-day cap)"
        )
    session.flush()
    if resettle:
        recount(session, lab=lab, now=now)
    return changes


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


def update_lab(
    session: Session,
    *,
    lab: Lab,
    release_at: datetime | None | Keep = KEEP,
    due_at: datetime | None | Keep = KEEP,
    score_policy: ScorePolicy | None = None,
    late_policy: LatePolicy | None = None,
    now: datetime | None = None,
) -> list[str]:
    """Change a lab's dates and policies; return a sentence per change. A changed due date
    recomputes every submission's late flag (extensions still apply); what counts, and how late
    it is, may have moved: late days follow."""
    changes = update_lab_row(
        session,
        lab=lab,
        release_at=release_at,
        due_at=due_at,
        score_policy=score_policy,
        late_policy=late_policy,
    )
    if not isinstance(due_at, Keep):
        refresh_late_flags(session, lab=lab)
    session.flush()
    if changes:
        recount(session, lab=lab, now=now or utcnow())
    return changes


def grant_extension(
    session: Session,
    *,
    course: Course,
    lab: Lab,
    student: User,
    due_at: datetime,
    granted_by: User | None,
    note: str = "",
    now: datetime | None = None,
) -> Extension:
    """Give a student their own due date (replacing an earlier extension of the same lab).
    Extensions win over late days: days a covered submission had spent come back."""
    row = write_extension(
        session,
        course=course,
        lab=lab,
        student=student,
        due_at=due_at,
        granted_by=granted_by,
        note=note,
    )
    refresh_late_flags(session, lab=lab, user_id=student.id)
    recount(session, lab=lab, users=[student.id], now=now or utcnow())
    return row


def revoke_extension(
    session: Session, *, lab: Lab, student: User, now: datetime | None = None
) -> bool:
    """Take an extension back; False when the student had none for this lab."""
    if not delete_extension(session, lab=lab, student=student):
        return False
    refresh_late_flags(session, lab=lab, user_id=student.id)
    recount(session, lab=lab, users=[student.id], now=now or utcnow())
    return True


MAX_REGRADE_WINDOW_DAYS = 365


def set_regrade_window(course: Course, days: int) -> list[str]:
    if days < 0 or days > MAX_REGRADE_WINDOW_DAYS:
        raise Invalid(
            f"The regrade window is 0 to {MAX_REGRADE_WINDOW_DAYS} days after grades are "
            f"released; {days} is not."
        )
    if days == course.regrade_window_days:
        return []
    course.regrade_window_days = days
    return [f"takes regrade requests until {days} days after a lab's grades are released"]
