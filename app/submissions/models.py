"""Submissions and their status history."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, utcnow


class Status(enum.StrEnum):
    queued = "queued"
    compiling = "compiling"
    compile_error = "compile_error"
    compiled = "compiled"  # compiled; running waits for a GPU worker
    running = "running"  # the correctness cases run
    timing = "timing"  # every case has its verdict; the timed section runs
    sanitizer = "sanitizer"  # compute-sanitizer runs on the lab's small case
    graded = "graded"
    error = "error"

    @property
    def is_final(self) -> bool:
        return self in (Status.compile_error, Status.graded, Status.error)


class Submission(Base):
    __tablename__ = "submissions"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    lab_id: Mapped[int] = mapped_column(ForeignKey("labs.id", ondelete="CASCADE"), index=True)
    source_text: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(String(64))
    # Shown to people only; never used as a path.
    filename: Mapped[str] = mapped_column(String(255), default="submission.cu")
    created_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    status: Mapped[str] = mapped_column(String(20), default=Status.queued.value, index=True)
    # A sentence about the status, e.g. why it is `error` or that running waits for a GPU.
    status_message: Mapped[str] = mapped_column(Text, default="")
    # For the course staff only: the technical side of the status (a driver error, which
    # worker to start, where to look); students read `status_message` alone.
    status_staff_note: Mapped[str] = mapped_column(Text, default="", server_default="")
    late: Mapped[bool] = mapped_column(default=False)
    score: Mapped[float | None] = mapped_column(default=None)
    max_score: Mapped[float | None] = mapped_column(default=None)
    compile_ok: Mapped[bool | None] = mapped_column(default=None)
    compile_reason: Mapped[str] = mapped_column(String(40), default="")
    compile_message: Mapped[str] = mapped_column(Text, default="")
    compile_log: Mapped[str] = mapped_column(Text, default="")
    compile_arch: Mapped[str] = mapped_column(String(20), default="")
    compile_warnings: Mapped[list[Any]] = mapped_column(JSON, default=list)
    declarations: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    summary: Mapped[str] = mapped_column(Text, default="")
    # For staff only: why this grading deserves a look (a median far faster than any reference).
    review_flag: Mapped[str] = mapped_column(Text, default="")
    graded_at: Mapped[datetime | None] = mapped_column(default=None)
    # The team it was made for (its members then are in submission_credits), if any.
    team_id: Mapped[int | None] = mapped_column(
        ForeignKey("teams.id", ondelete="SET NULL"), default=None, index=True
    )
    # Points the staff added or took away (an accepted regrade request), on top of `score`;
    # a regrade by a worker replaces `score` and keeps this.
    points_adjustment: Mapped[float] = mapped_column(default=0.0, server_default="0")
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class SubmissionEvent(Base):
    """One status change of a submission, with the time it happened."""

    __tablename__ = "submission_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[int] = mapped_column(
        ForeignKey("submissions.id", ondelete="CASCADE"), index=True
    )
    status: Mapped[str] = mapped_column(String(20))
    message: Mapped[str] = mapped_column(Text, default="")
    staff_note: Mapped[str] = mapped_column(Text, default="", server_default="")
    at: Mapped[datetime] = mapped_column(default=utcnow)
