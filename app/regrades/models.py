"""Regrade requests and their history."""

from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, utcnow


class RequestState(enum.StrEnum):
    open = "open"
    accepted = "accepted"
    declined = "declined"
    withdrawn = "withdrawn"


class RegradeRequest(Base):
    __tablename__ = "regrade_requests"
    # One open request per submission, held by the database: two asks at once (a double
    # click, a script, two teammates) cannot both open one, whatever the service checked.
    __table_args__ = (
        Index(
            "uq_regrade_requests_open_submission",
            "submission_id",
            unique=True,
            sqlite_where=text("state = 'open'"),
            postgresql_where=text("state = 'open'"),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    lab_id: Mapped[int] = mapped_column(ForeignKey("labs.id", ondelete="CASCADE"), index=True)
    submission_id: Mapped[int] = mapped_column(
        ForeignKey("submissions.id", ondelete="CASCADE"), index=True
    )
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    case_name: Mapped[str] = mapped_column(String(100), default="")  # "" for the whole one
    text: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(20), default=RequestState.open.value, index=True)
    # How an accepted request was settled: "regrade" (graded again) or "adjust" (points).
    outcome: Mapped[str] = mapped_column(String(20), default="")
    answer: Mapped[str] = mapped_column(Text, default="")
    points: Mapped[float | None] = mapped_column(default=None)  # the adjustment, if any
    answered_by_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), default=None
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    answered_at: Mapped[datetime | None] = mapped_column(default=None)


class RegradeEvent(Base):
    """One change to a request (asked, answered, accepted, declined, withdrawn), with who."""

    __tablename__ = "regrade_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    request_id: Mapped[int] = mapped_column(
        ForeignKey("regrade_requests.id", ondelete="CASCADE"), index=True
    )
    by_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), default=None
    )
    action: Mapped[str] = mapped_column(String(20))
    text: Mapped[str] = mapped_column(Text, default="")
    points: Mapped[float | None] = mapped_column(default=None)
    at: Mapped[datetime] = mapped_column(default=utcnow)
