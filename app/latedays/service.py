"""Late-day budgets, the ledger: what each student has, holds, spends and has left.

A course gives every student `Course.late_days` days, at most a cap of them on one lab
(app.courses.release.late_day_cap). A late upload holds the days it needs from its intake
(app.latedays.intake: a `LateDayReservation` per student it counts for), so the queue's delay
is no window: a lab that refuses late work takes an upload only while the days it needs are
there to hold, and parallel uploads hold them one after the other. A late submission spends
days when it comes to count (app.policy.settle writes the student's `LateDayCharge` of the
lab); every change is a `LateDayEvent` in the student's history.

Every settle of a student, and every late upload, takes the student's turn first (`take_turn`,
a write on their enrolment row: a row lock on PostgreSQL, the write lock on SQLite), so two
gradings finishing at once (two uploads, a regrade beside a grading) read and spend the same
budget one after the other: the days are spent once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.core.database import as_dict
from app.core.errors import Invalid
from app.courses.deadlines import Deadline
from app.courses.models import Course, Enrollment, Lab, LatePolicy, Role
from app.courses.release import late_day_cap
from app.latedays.holds import held_beyond_charges, lab_hold, reservations_of
from app.latedays.models import LateDayCharge, LateDayEvent
from app.users.models import User

MAX_LATE_DAYS = 365
MAX_REASON = 500


@dataclass(frozen=True)
class Balance:
    budget: int  # the course's
    adjusted: int  # the staff's grants (+) and deductions (-) for this student
    spent: int
    # Held by late uploads still being graded, beyond what their labs' charges take.
    held: int = 0

    @property
    def total(self) -> int:
        return self.budget + self.adjusted

    @property
    def left(self) -> int:
        return self.total - self.spent - self.held


@dataclass(frozen=True)
class LabUse:
    lab: Lab
    charge: LateDayCharge


def balance(session: Session, *, course: Course, user_id: int) -> Balance:
    adjusted = session.scalar(
        select(func.coalesce(func.sum(LateDayEvent.delta), 0)).where(
            LateDayEvent.course_id == course.id,
            LateDayEvent.user_id == user_id,
            LateDayEvent.kind == "adjust",
        )
    )
    spent = session.scalar(
        select(func.coalesce(func.sum(LateDayCharge.days), 0)).where(
            LateDayCharge.course_id == course.id, LateDayCharge.user_id == user_id
        )
    )
    held = held_beyond_charges(session, course_id=course.id, user_ids=[user_id]).get(user_id, 0)
    return Balance(
        budget=course.late_days, adjusted=int(adjusted or 0), spent=int(spent or 0), held=held
    )


def take_turn(session: Session, *, course_id: int, user_id: int) -> None:
    """Wait for (and hold until commit) this student's turn at their late days."""
    session.execute(
        update(Enrollment)
        .where(Enrollment.course_id == course_id, Enrollment.user_id == user_id)
        .values(role=Enrollment.role)
        .execution_options(synchronize_session=False)
    )


def charge_of(session: Session, *, lab: Lab, user_id: int) -> LateDayCharge | None:
    # Read afresh, not from the session's memory: another transaction may have just changed it.
    return session.scalar(
        select(LateDayCharge)
        .where(LateDayCharge.lab_id == lab.id, LateDayCharge.user_id == user_id)
        .execution_options(populate_existing=True)
    )


def available_for(session: Session, *, course: Course, lab: Lab, user_id: int) -> int:
    """Late days the student could spend on this lab now: what is left, plus what the lab
    holds already (its charge, or a late upload's reservation), within the lab's cap."""
    if course.late_days <= 0:
        return 0
    hold = lab_hold(
        charge_of(session, lab=lab, user_id=user_id),
        reservations_of(session, lab_id=lab.id, user_id=user_id),
    )
    left = balance(session, course=course, user_id=user_id).left
    return max(0, min(late_day_cap(course, lab), left + hold))


def days_text(n: int) -> str:
    return f"{n} day{'s' if n != 1 else ''}"


def note_change(
    session: Session,
    *,
    course: Course,
    lab: Lab,
    user_id: int,
    submission_id: int | None,
    kind: str,
    delta: int,
    reason: str,
    now: datetime,
    by: User | None = None,
) -> None:
    """A line in the student's history, with what they have left once the change is made."""
    session.flush()
    session.add(
        LateDayEvent(
            course_id=course.id,
            user_id=user_id,
            lab_id=lab.id,
            submission_id=submission_id,
            kind=kind,
            delta=delta,
            remaining_after=balance(session, course=course, user_id=user_id).left,
            reason=reason,
            by_id=by.id if by else None,
            at=now,
        )
    )
    session.flush()


def set_budget(
    session: Session,
    *,
    course: Course,
    days: int | None = None,
    cap: int | None | str = "keep",
    now: datetime,
) -> list[str]:
    """Instructors: the course's late days per student and its per-lab cap (None: no cap).
    Where either changed, every student's late days are owed a recount: the caller commits,
    then runs it (app.policy.recount.recount_owed)."""
    changes = []
    if days is not None:
        if days < 0 or days > MAX_LATE_DAYS:
            raise Invalid(
                f"A late-day budget is 0 to {MAX_LATE_DAYS} days (0: none); {days} is not.",
                field="days",
            )
        _, spent = late_day_sums(session, course=course)
        held = held_beyond_charges(session, course_id=course.id)
        most = max((spent.get(u, 0) + held.get(u, 0) for u in set(spent) | set(held)), default=0)
        if days < most:
            raise Invalid(
                f"A student has already spent {most} late days in {course.slug} (or holds them "
                "for late uploads still being graded); the budget cannot go below that. Refund "
                f"them first, or keep at least {most}.",
                field="days",
            )
        if days != course.late_days:
            course.late_days = days
            changes.append(f"gives {days} late days per student" if days else "gives no late days")
    if cap != "keep":
        if cap is not None and (not isinstance(cap, int) or cap < 0 or cap > MAX_LATE_DAYS):
            raise Invalid(f"A per-lab cap is 0 to {MAX_LATE_DAYS} days, or none.", field="cap")
        if cap != course.late_day_cap:
            course.late_day_cap = cap  # type: ignore[assignment]
            changes.append(f"caps late days at {cap} per lab" if cap is not None else "has no cap")
    if changes:
        # Every student's late days are settled again, but not here: in short batches after
        # this commits (app.policy.recount), so the change never holds the write lock long.
        course.late_days_recount_at = now
        course.late_days_recounted_to = 0
        session.flush()
    return changes


def history(session: Session, *, course: Course, user_id: int) -> list[tuple[LateDayEvent, str]]:
    """The student's late-day events, newest first, with the lab's slug ("" for none)."""
    rows = session.execute(
        select(LateDayEvent, Lab.slug)
        .outerjoin(Lab, Lab.id == LateDayEvent.lab_id)
        .where(LateDayEvent.course_id == course.id, LateDayEvent.user_id == user_id)
        .order_by(LateDayEvent.id.desc())
    ).all()
    return [(event, slug or "") for event, slug in rows]


def uses(session: Session, *, course: Course, user_id: int) -> list[LabUse]:
    rows = session.execute(
        select(Lab, LateDayCharge)
        .join(LateDayCharge, LateDayCharge.lab_id == Lab.id)
        .where(LateDayCharge.course_id == course.id, LateDayCharge.user_id == user_id)
        .order_by(Lab.slug)
    ).all()
    return [LabUse(lab=lab, charge=charge) for lab, charge in rows]


@dataclass(frozen=True)
class StudentBalance:
    student: User
    balance: Balance


def balances(session: Session, *, course: Course) -> list[StudentBalance]:
    """Every student of the course with their late days, by email."""
    adjusted, spent = late_day_sums(session, course=course)
    held = held_beyond_charges(session, course_id=course.id)
    students = session.scalars(
        select(User)
        .join(Enrollment, Enrollment.user_id == User.id)
        .where(Enrollment.course_id == course.id, Enrollment.role == Role.student.value)
        .order_by(User.email)
    ).all()
    return [
        StudentBalance(
            student=s,
            balance=Balance(
                budget=course.late_days,
                adjusted=adjusted.get(s.id, 0),
                spent=spent.get(s.id, 0),
                held=held.get(s.id, 0),
            ),
        )
        for s in students
    ]


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


@dataclass(frozen=True)
class Outlook:
    """What a late upload made now would do to the student's late days: the lab page says it
    in words before the upload."""

    days_late: int  # started days past the student's due date in force
    holds: int  # days it would hold at once, and spend only if it compiles and counts
    already: int  # of those, days the lab holds already (an earlier late upload's)
    left: int  # the student's days left now, before it
    cap: int  # the most one lab takes
    penalty: float  # the lab's percent per late day not covered

    @property
    def left_after(self) -> int:
        return self.left - (self.holds - self.already)

    @property
    def uncovered(self) -> int:
        return self.days_late - self.holds


def outlook(
    session: Session, *, course: Course, lab: Lab, user_id: int, deadline: Deadline, now: datetime
) -> Outlook | None:
    """For a student about to upload late where the course gives late days; None otherwise."""
    if course.late_days <= 0 or not deadline.is_late(now):
        return None
    days_late = deadline.days_late(now)
    cap = late_day_cap(course, lab)
    already = lab_hold(
        charge_of(session, lab=lab, user_id=user_id),
        reservations_of(session, lab_id=lab.id, user_id=user_id),
    )
    holds = min(days_late, cap, available_for(session, course=course, lab=lab, user_id=user_id))
    return Outlook(
        days_late=days_late,
        holds=holds,
        already=min(already, holds),
        left=balance(session, course=course, user_id=user_id).left,
        cap=cap,
        penalty=lab.late_penalty or 0.0,
    )


def grace_days(
    session: Session, *, course: Course, lab: Lab, user_id: int, deadline: Deadline, now: datetime
) -> int:
    """Late days that keep a lab refusing late work open for the student now."""
    if lab.late_policy != LatePolicy.refuse.value or not deadline.is_late(now):
        return 0
    return available_for(session, course=course, lab=lab, user_id=user_id)
