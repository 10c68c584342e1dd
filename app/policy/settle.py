"""Late days follow what counts: a student's charge of a lab matches the submission counting now.

A late submission spends days when it becomes the one that counts for the student (a worker
recorded its grade, or a regrade, a new due date, an extension or a changed policy made it
count): `settle` makes the student's one charge row of the lab (`LateDayCharge`, unique per lab
and student) match the submission that counts now, within what is left of the budget, drops the
reservations of the lab's uploads that have a verdict (the counted one's days are its charge's
now; the others' come back: it did not compile, failed, or another submission counts instead),
and records the change as a `LateDayEvent`. A compile error spends nothing, though it counts (as
0). A charge never takes days already spent or held for another lab; days a student gets back
(an extension, an on-time submission counting instead, a released hold, a staff grant) are
offered to their labs still late beyond their days, earliest due first. Extensions win:
lateness is measured from the due date in force for the student, so an extension that covers a
submission refunds what it had spent.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.errors import Invalid, NotFound
from app.courses.deadlines import deadline_for
from app.courses.models import Course, Lab, Role
from app.courses.release import late_day_cap
from app.courses.service import labs_of, role_in
from app.latedays.holds import lab_hold, reservations_of
from app.latedays.models import LateDayCharge, LateDayEvent, LateDayReservation
from app.latedays.service import (
    MAX_LATE_DAYS,
    MAX_REASON,
    Balance,
    balance,
    charge_of,
    days_text,
    note_change,
    take_turn,
)
from app.policy.counting import student_cell
from app.submissions.models import Status, Submission
from app.users.models import User


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
    if course.late_days <= 0 and not _anything_held(session, lab=lab, user_id=user_id):
        return None
    if not turn_taken:
        session.flush()
        take_turn(session, course_id=course.id, user_id=user_id)
    held = charge_of(session, lab=lab, user_id=user_id)
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


def _anything_held(session: Session, *, lab: Lab, user_id: int) -> bool:
    """Whether the student has a charge or a reservation on the lab (a course without late
    days may still have them from before)."""
    return charge_of(session, lab=lab, user_id=user_id) is not None or bool(
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
        raise Invalid(
            "Say why the late days change; the student and the staff see the reason.",
            field="reason",
        )
    if len(reason) > MAX_REASON:
        raise Invalid(
            f"The reason is longer than {MAX_REASON} characters; shorten it.", field="reason"
        )
    if delta == 0 or abs(delta) > MAX_LATE_DAYS:
        raise Invalid(
            f"Change the late days by 1 to {MAX_LATE_DAYS} days, up or down.", field="delta"
        )
    if role_in(session, user=student, course=course) != Role.student:
        raise NotFound(f"{student.email} is not a student of {course.slug}.", field="student")
    take_turn(session, course_id=course.id, user_id=student.id)
    now_balance = balance(session, course=course, user_id=student.id)
    if now_balance.left + delta < 0:
        raise Invalid(
            f"{student.email} has {now_balance.left} late days left; taking {-delta} would "
            "leave fewer than none. Take at most what is left.",
            field="delta",
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
