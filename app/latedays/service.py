"""Late-day budgets: holding them when a late upload comes in, spending them when a late
submission comes to count, the staff's adjustments, and what each student has left.

A course gives every student `Course.late_days` days, at most a cap of them on one lab
(app.courses.release.late_day_cap). A late upload holds the days it needs from its intake
(app.latedays.intake: a `LateDayReservation` per student it counts for), so the queue's delay
is no window: a lab that refuses late work takes an upload only while the days it needs are
there to hold, and parallel uploads hold them one after the other. A late submission spends
days when it becomes the one that counts for the student (a worker recorded its grade, or a
regrade, a new due date, an extension or a changed policy made it count): `settle` makes the
student's one charge row of the lab (`LateDayCharge`, unique per lab and student) match the
submission that counts now, within what is left of the budget, drops the reservations of the
lab's uploads that have a verdict (the counted one's days are its charge's now; the others'
come back: it did not compile, failed, or another submission counts instead), and records the
change as a `LateDayEvent`. A compile error spends nothing, though it counts (as 0). A charge
never takes days already spent or held for another lab; days a student gets back (an
extension, an on-time submission counting instead, a released hold, a staff grant) are offered
to their labs still late beyond their days, earliest due first.

Every settle of a student, and every late upload, takes the student's turn first, a write on
their enrolment row (a row lock on PostgreSQL, the write lock on SQLite), so two gradings
finishing at once (two uploads, a regrade beside a grading) read and spend the same budget one
after the other: the days are spent once. Extensions still win: lateness is measured from the
due date in force for the student, so an extension that covers a submission refunds what it
had spent.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.core.database import as_dict
from app.core.errors import Invalid, NotFound
from app.courses.deadlines import deadline_for
from app.courses.models import Course, Enrollment, Lab, Role
from app.courses.release import late_day_cap
from app.courses.service import labs_of, role_in
from app.latedays.holds import held_beyond_charges, lab_hold, reservations_of
from app.latedays.models import LateDayCharge, LateDayEvent, LateDayReservation
from app.submissions.credits import credited_users
from app.submissions.models import Status, Submission
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


def _charge_of(session: Session, *, lab: Lab, user_id: int) -> LateDayCharge | None:
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
        _charge_of(session, lab=lab, user_id=user_id),
        reservations_of(session, lab_id=lab.id, user_id=user_id),
    )
    left = balance(session, course=course, user_id=user_id).left
    return max(0, min(late_day_cap(course, lab), left + hold))


def days_text(n: int) -> str:
    return f"{n} day{'s' if n != 1 else ''}"


def settle(
    session: Session,
    *,
    course: Course,
    lab: Lab,
    user_id: int,
    now: datetime,
    reason: str = "",
    by: User | None = None,
    turn_taken: bool = False,
) -> LateDayCharge | None:
    """Make the student's late-day charge of the lab match the submission that counts for them
    now, and give back what their late uploads of the lab held where those cannot count any
    more; return the charge (None where nothing is or was spent).

    A compile error spends no late days, though it counts (as 0): its days come back."""
    from app.policy.counting import student_cell

    if course.late_days <= 0 and not _anything_held(session, lab=lab, user_id=user_id):
        return None
    if not turn_taken:
        session.flush()
        take_turn(session, course_id=course.id, user_id=user_id)
    held = _charge_of(session, lab=lab, user_id=user_id)
    reserved = reservations_of(session, lab_id=lab.id, user_id=user_id)
    cell = student_cell(session, lab=lab, user_id=user_id, rubric=False)
    counted, days_late = cell.counted, cell.days_late
    if held is None and days_late == 0 and not reserved:
        return None
    before = held.days if held else 0
    hold_before = lab_hold(held, reserved)
    left_elsewhere = balance(session, course=course, user_id=user_id).left + hold_before
    submission_id = counted.submission_id if counted is not None else None
    facts = _submission_facts(session, [r.submission_id for r in reserved] + [submission_id or -1])
    did_not_compile = submission_id is not None and (
        facts[submission_id][2] is False or facts[submission_id][0] == Status.compile_error.value
    )
    want = (
        0 if did_not_compile else max(0, min(days_late, late_day_cap(course, lab), left_elsewhere))
    )
    released, kept = _release_reservations(
        session, course=course, lab=lab, user_id=user_id, reserved=reserved, facts=facts,
        counted_id=submission_id,
    )  # fmt: skip
    if held is None and days_late > 0:
        held = LateDayCharge(course_id=course.id, lab_id=lab.id, user_id=user_id, days=0)
        session.add(held)
    if held is not None:
        changed = (held.days, held.submission_id, held.days_late) != (
            want,
            submission_id,
            days_late,
        )
        held.days, held.submission_id, held.days_late = want, submission_id, days_late
        if changed:
            held.updated_at = now
    else:
        want = 0
    session.flush()
    hold_after = lab_hold(held, kept)
    if want != before or hold_after != hold_before:
        if want > before:
            kind = "spend"
            why = f"submission {submission_id} counts, {days_text(days_late)} late"
            if hold_after == hold_before:
                why += ": it spends the days it held"
        elif want < before:
            kind = "refund"
            why = (
                f"submission {submission_id} counts now and did not compile; a compile error "
                "spends no late days"
                if did_not_compile
                else "the lateness it paid for no longer counts"
            )
        else:
            kind = "release"
            why = "; ".join(released) or "what the upload held is no longer needed"
        note_change(
            session,
            course=course,
            lab=lab,
            user_id=user_id,
            submission_id=submission_id,
            kind=kind,
            delta=hold_before - hold_after,
            reason=reason or why,
            by=by,
            now=now,
        )
    if hold_after < hold_before:
        _offer_back(session, course=course, user_id=user_id, now=now, skip=lab.id)
    return held


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


def _anything_held(session: Session, *, lab: Lab, user_id: int) -> bool:
    """Whether the student has a charge or a reservation on the lab (a course without late
    days may still have them from before)."""
    return _charge_of(session, lab=lab, user_id=user_id) is not None or bool(
        reservations_of(session, lab_id=lab.id, user_id=user_id)
    )


def _submission_facts(
    session: Session, ids: list[int]
) -> dict[int, tuple[str, datetime, bool | None]]:
    """Status, upload time and whether it compiled (None: not yet) of these submissions."""
    return {
        sid: (status, created_at, compile_ok)
        for sid, status, created_at, compile_ok in session.execute(
            select(
                Submission.id, Submission.status, Submission.created_at, Submission.compile_ok
            ).where(Submission.id.in_(ids or [-1]))
        )
    }


def _release_reservations(
    session: Session,
    *,
    course: Course,
    lab: Lab,
    user_id: int,
    reserved: list[LateDayReservation],
    facts: dict[int, tuple[str, datetime, bool | None]],
    counted_id: int | None,
) -> tuple[list[str], list[LateDayReservation]]:
    """Drop the reservations of uploads with a verdict (the counted one's days are now its
    charge's; the others' cannot count), and shrink those still being graded to what they need
    now (an extension, a lower cap). A sentence per upload that gave days back, and the
    reservations kept."""
    said = []
    kept = []
    deadline = deadline_for(session, lab=lab, user_id=user_id)
    for row in reserved:
        status, created_at, _ = facts[row.submission_id]
        if Status(status).is_final:
            session.delete(row)
            if row.submission_id == counted_id and status != Status.compile_error.value:
                continue
            why = {
                Status.compile_error.value: "did not compile",
                Status.error.value: "failed on our side",
            }.get(status, "does not count: another submission counts instead")
            said.append(f"submission {row.submission_id} {why}: the days it held come back")
            continue
        need = min(deadline.days_late(created_at), late_day_cap(course, lab))
        if need <= 0:
            session.delete(row)
            said.append(f"submission {row.submission_id} is no longer late: its days come back")
            continue
        if need < row.days:
            row.days = need
            said.append(
                f"submission {row.submission_id} is less late now: it holds {days_text(need)}"
            )
        kept.append(row)
    return said, kept


def _offer_back(
    session: Session, *, course: Course, user_id: int, now: datetime, skip: int | None = None
) -> None:
    """Days came back: cover labs still late beyond what they spent, earliest due first."""
    short = {
        c.lab_id
        for c in session.scalars(
            select(LateDayCharge).where(
                LateDayCharge.course_id == course.id,
                LateDayCharge.user_id == user_id,
                LateDayCharge.days < LateDayCharge.days_late,
            )
        )
        if c.lab_id != skip
    }
    for lab in labs_of(session, course=course):
        if lab.id not in short:
            continue
        if balance(session, course=course, user_id=user_id).left <= 0:
            return
        settle(session, course=course, lab=lab, user_id=user_id, now=now, turn_taken=True)


def settle_submission(session: Session, *, submission_id: int, now: datetime) -> None:
    """After a grading: settle every student the submission counts for (in id order, so two
    settles of a team never wait on each other crosswise)."""
    lab_id = session.scalar(select(Submission.lab_id).where(Submission.id == submission_id))
    lab = session.get(Lab, lab_id) if lab_id is not None else None
    if lab is None:
        return
    course = session.get_one(Course, lab.course_id)
    if course.late_days <= 0 and not _any_charge(session, lab=lab):
        return
    for user_id in sorted(credited_users(session, submission_id=submission_id)):
        settle(session, course=course, lab=lab, user_id=user_id, now=now)


def _any_charge(session: Session, *, lab: Lab) -> bool:
    """Whether anything of the lab's was ever charged, or is held by an upload."""
    found = session.scalar(select(LateDayCharge.id).where(LateDayCharge.lab_id == lab.id).limit(1))
    if found is None:
        found = session.scalar(
            select(LateDayReservation.id).where(LateDayReservation.lab_id == lab.id).limit(1)
        )
    return found is not None


def settle_lab(
    session: Session, *, course: Course, lab: Lab, now: datetime, user_id: int | None = None
) -> None:
    """After a change that can move what counts or how late it is (a due date, an extension, a
    policy, a cap): settle the lab's students (one of them, if given)."""
    if course.late_days <= 0 and not _any_charge(session, lab=lab):
        return
    users = (
        [user_id]
        if user_id is not None
        else sorted(
            session.scalars(
                select(Enrollment.user_id).where(
                    Enrollment.course_id == course.id, Enrollment.role == Role.student.value
                )
            )
        )
    )
    for uid in users:
        settle(session, course=course, lab=lab, user_id=uid, now=now)


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
    then runs it (app.latedays.recount.recount_owed)."""
    changes = []
    if days is not None:
        if days < 0 or days > MAX_LATE_DAYS:
            raise Invalid(
                f"A late-day budget is 0 to {MAX_LATE_DAYS} days (0: none); {days} is not."
            )
        _, spent = late_day_sums(session, course=course)
        held = held_beyond_charges(session, course_id=course.id)
        most = max((spent.get(u, 0) + held.get(u, 0) for u in set(spent) | set(held)), default=0)
        if days < most:
            raise Invalid(
                f"A student has already spent {most} late days in {course.slug} (or holds them "
                "for late uploads still being graded); the budget cannot go below that. Refund "
                f"them first, or keep at least {most}."
            )
        if days != course.late_days:
            course.late_days = days
            changes.append(f"gives {days} late days per student" if days else "gives no late days")
    if cap != "keep":
        if cap is not None and (not isinstance(cap, int) or cap < 0 or cap > MAX_LATE_DAYS):
            raise Invalid(f"A per-lab cap is 0 to {MAX_LATE_DAYS} days, or none.")
        if cap != course.late_day_cap:
            course.late_day_cap = cap  # type: ignore[assignment]
            changes.append(f"caps late days at {cap} per lab" if cap is not None else "has no cap")
    if changes:
        # Every student's late days are settled again, but not here: in short batches after
        # this commits (app.latedays.recount), so the change never holds the write lock long.
        course.late_days_recount_at = now
        course.late_days_recounted_to = 0
        session.flush()
    return changes


def adjust(
    session: Session,
    *,
    course: Course,
    student: User,
    delta: int,
    reason: str,
    by: User | None,
    now: datetime,
) -> Balance:
    """Staff: give a student more late days (delta > 0) or take some away, with a reason."""
    reason = " ".join(reason.split())
    if not reason:
        raise Invalid("Say why the late days change; the student and the staff see the reason.")
    if len(reason) > MAX_REASON:
        raise Invalid(f"The reason is longer than {MAX_REASON} characters; shorten it.")
    if delta == 0 or abs(delta) > MAX_LATE_DAYS:
        raise Invalid(f"Change the late days by 1 to {MAX_LATE_DAYS} days, up or down.")
    if role_in(session, user=student, course=course) != Role.student:
        raise NotFound(f"{student.email} is not a student of {course.slug}.")
    take_turn(session, course_id=course.id, user_id=student.id)
    now_balance = balance(session, course=course, user_id=student.id)
    if now_balance.left + delta < 0:
        raise Invalid(
            f"{student.email} has {now_balance.left} late days left; taking {-delta} would "
            "leave fewer than none. Take at most what is left."
        )
    session.add(
        LateDayEvent(
            course_id=course.id,
            user_id=student.id,
            kind="adjust",
            delta=delta,
            remaining_after=now_balance.left + delta,
            reason=reason,
            by_id=by.id if by else None,
            at=now,
        )
    )
    session.flush()
    if delta > 0:
        _offer_back(session, course=course, user_id=student.id, now=now)
    return balance(session, course=course, user_id=student.id)


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
