"""Late days held at intake: a late upload holds what it needs of each student's late days
before it is stored (app.policy.settle settles them once it has a verdict)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from app.courses.deadlines import deadline_for
from app.courses.models import Course, Lab
from app.courses.release import late_day_cap
from app.latedays.holds import lab_hold, reservations_of
from app.latedays.models import LateDayReservation
from app.latedays.service import available_for, charge_of, days_text, note_change, take_turn


def reserve_for_upload(
    session: Session,
    *,
    course: Course,
    lab: Lab,
    submission_id: int,
    students: list[int],
    now: datetime,
) -> dict[int, int]:
    """At intake, for a late upload: each student it counts for holds the late days it needs
    (as late as it is by their own due date, within the lab's cap and what they have left),
    under their turn, so parallel uploads never hold the same day twice. Returns the days held
    per student (the uploader's is all it needs where the lab refuses late work: the intake
    checked that under the same turn). `students`: everyone it counts for
    (app.submissions.credits); it was uploaded `now`."""
    if course.late_days <= 0:
        return {}
    held: dict[int, int] = {}
    for user_id in sorted(students):
        need = min(
            deadline_for(session, lab=lab, user_id=user_id).days_late(now),
            late_day_cap(course, lab),
        )
        if need <= 0:
            continue
        take_turn(session, course_id=course.id, user_id=user_id)
        before = lab_hold(
            charge_of(session, lab=lab, user_id=user_id),
            reservations_of(session, lab_id=lab.id, user_id=user_id),
        )
        days = min(need, available_for(session, course=course, lab=lab, user_id=user_id))
        if days <= 0:
            continue
        session.add(
            LateDayReservation(
                course_id=course.id,
                lab_id=lab.id,
                user_id=user_id,
                submission_id=submission_id,
                days=days,
                created_at=now,
            )
        )
        note_change(
            session,
            course=course,
            lab=lab,
            user_id=user_id,
            submission_id=submission_id,
            kind="hold",
            delta=before - max(before, days),
            reason=(
                f"submission {submission_id} came {days_text(need)} late: it holds "
                f"{days_text(days)} while it is graded (given back if it does not compile or "
                "another submission counts instead)"
            ),
            now=now,
        )
        held[user_id] = days
    session.flush()
    return held
