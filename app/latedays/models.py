"""What each student spent of their course's late days, per lab, what their late uploads still
being graded hold, and every change to it."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, utcnow


class LateDayCharge(Base):
    """The late days one student's counted submission of one lab spends; one row per (lab,
    student), so a charge can be changed but never made twice."""

    __tablename__ = "late_day_charges"
    __table_args__ = (UniqueConstraint("lab_id", "user_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"), index=True)
    lab_id: Mapped[int] = mapped_column(ForeignKey("labs.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    submission_id: Mapped[int | None] = mapped_column(
        ForeignKey("submissions.id", ondelete="SET NULL"), default=None
    )
    days: Mapped[int] = mapped_column(default=0)  # spent on this lab
    days_late: Mapped[int] = mapped_column(default=0)  # how late the counted submission is
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class LateDayReservation(Base):
    """Late days one late upload holds for one student it counts for, from its intake: taken
    under the student's turn (so parallel uploads cannot all count the same last day) and
    given back when it cannot count (it did not compile, failed, or another submission counts
    instead), or handed to the lab's charge when it counts. A lab holds the most of its
    reservations and its charge, never their sum: it is charged once."""

    __tablename__ = "late_day_reservations"
    __table_args__ = (
        UniqueConstraint("submission_id", "user_id"),
        CheckConstraint("days > 0", name="days_positive"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"), index=True)
    lab_id: Mapped[int] = mapped_column(ForeignKey("labs.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    submission_id: Mapped[int] = mapped_column(
        ForeignKey("submissions.id", ondelete="CASCADE"), index=True
    )
    days: Mapped[int]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class LateDayEvent(Base):
    """One change to a student's late days: a charge, a refund, or a staff adjustment."""

    __tablename__ = "late_day_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    lab_id: Mapped[int | None] = mapped_column(
        ForeignKey("labs.id", ondelete="SET NULL"), default=None
    )
    submission_id: Mapped[int | None] = mapped_column(
        ForeignKey("submissions.id", ondelete="SET NULL"), default=None
    )
    # spend, refund, adjust; hold (a late upload's reservation), release (one given back)
    kind: Mapped[str] = mapped_column(String(20))
    # Days left change by: negative for spending or holding, positive for a refund, a release
    # or a grant (0 where days held at an upload are spent as they were held).
    delta: Mapped[int]
    remaining_after: Mapped[int]
    reason: Mapped[str] = mapped_column(Text, default="")
    by_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), default=None
    )
    at: Mapped[datetime] = mapped_column(default=utcnow)
