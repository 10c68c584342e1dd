"""What late uploads still being graded hold of their students' late days (reading only; the
reservations are made and given back by app.latedays.service).

A lab takes from the budget the most of its charge (what its counted submission spends) and of
its uploads' reservations, never their sum: a lab is charged once, so a second late upload of
the same lab needs only what the first did not already hold.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.latedays.models import LateDayCharge, LateDayReservation


def reservations_of(session: Session, *, lab_id: int, user_id: int) -> list[LateDayReservation]:
    # Read afresh, not from the session's memory: another transaction may have just changed them.
    return list(
        session.scalars(
            select(LateDayReservation)
            .where(LateDayReservation.lab_id == lab_id, LateDayReservation.user_id == user_id)
            .order_by(LateDayReservation.id)
            .execution_options(populate_existing=True)
        )
    )


def lab_hold(charge: LateDayCharge | None, reservations: list[LateDayReservation]) -> int:
    """What one lab takes from the student's budget: its charge or its largest reservation."""
    return max([charge.days if charge else 0, *(r.days for r in reservations)])


def held_beyond_charges(
    session: Session, *, course_id: int, user_ids: list[int] | None = None
) -> dict[int, int]:
    """Per student (of these, if given) with any reservation: the days their reservations hold
    beyond what their labs' charges already take."""
    out: dict[int, int] = {}
    for (user_id, _), days in _held_per_lab(
        session, course_id=course_id, user_ids=user_ids
    ).items():
        out[user_id] = out.get(user_id, 0) + days
    return out


def held_per_lab(session: Session, *, course_id: int, user_id: int) -> dict[int, int]:
    """One student's days held beyond the charges, per lab id (labs with none left out)."""
    held = _held_per_lab(session, course_id=course_id, user_ids=[user_id])
    return {lab_id: days for (_, lab_id), days in held.items() if days > 0}


def _held_per_lab(
    session: Session, *, course_id: int, user_ids: list[int] | None
) -> dict[tuple[int, int], int]:
    most = (
        select(
            LateDayReservation.user_id,
            LateDayReservation.lab_id,
            func.max(LateDayReservation.days).label("days"),
        )
        .where(LateDayReservation.course_id == course_id)
        .group_by(LateDayReservation.user_id, LateDayReservation.lab_id)
    )
    if user_ids is not None:
        most = most.where(LateDayReservation.user_id.in_(user_ids or [-1]))
    held = most.subquery()
    rows = session.execute(
        select(
            held.c.user_id, held.c.lab_id, held.c.days, func.coalesce(LateDayCharge.days, 0)
        ).outerjoin(
            LateDayCharge,
            (LateDayCharge.lab_id == held.c.lab_id) & (LateDayCharge.user_id == held.c.user_id),
        )
    )
    return {
        (user_id, lab_id): max(0, int(reserved) - int(charged))
        for user_id, lab_id, reserved, charged in rows
    }
