"""What each student spent of their course's late days, per lab, and every change to it."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, Text, UniqueConstraint
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
    kind: Mapped[str] = mapped_column(String(20))  # spend, refund, adjust
    # Days the budget changes by: negative for spending, positive for a refund or a grant.
    delta: Mapped[int]
    remaining_after: Mapped[int]
    reason: Mapped[str] = mapped_column(Text, default="")
    by_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), default=None
    )
    at: Mapped[datetime] = mapped_column(default=utcnow)
