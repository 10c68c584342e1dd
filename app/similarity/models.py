"""Similarity reports of a lab, computed by a worker, and their most similar pairs."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, utcnow
from app.jobs.lease import Lease


class ReportState(enum.StrEnum):
    queued = "queued"
    running = "running"
    done = "done"
    failed = "failed"


class SimilarityReport(Base):
    __tablename__ = "similarity_reports"

    id: Mapped[int] = mapped_column(primary_key=True)
    lab_id: Mapped[int] = mapped_column(ForeignKey("labs.id", ondelete="CASCADE"), index=True)
    requested_by_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), default=None
    )
    # Also compare with the same lab's submissions in the course's earlier offerings (those
    # linked to it by EarlierOffering, once they are over).
    include_past: Mapped[bool] = mapped_column(default=False)
    state: Mapped[str] = mapped_column(String(20), default=ReportState.queued.value, index=True)
    attempt: Mapped[int] = mapped_column(default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(default=None)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    error: Mapped[str] = mapped_column(Text, default="")
    # What was compared: submissions, earlier terms' submissions, boilerplate files.
    stats: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class SimilarityPair(Base):
    """Two submissions and the passages they share (character ranges of each source)."""

    __tablename__ = "similarity_pairs"

    id: Mapped[int] = mapped_column(primary_key=True)
    report_id: Mapped[int] = mapped_column(
        ForeignKey("similarity_reports.id", ondelete="CASCADE"), index=True
    )
    rank: Mapped[int]
    a_submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    b_submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    a_label: Mapped[str] = mapped_column(String(400))
    b_label: Mapped[str] = mapped_column(String(400))
    a_similarity: Mapped[float]
    b_similarity: Mapped[float]
    overlap_tokens: Mapped[int]
    a_slices: Mapped[list[Any]] = mapped_column(JSON, default=list)
    b_slices: Mapped[list[Any]] = mapped_column(JSON, default=list)


class ReferenceCopy(Base):
    """A submission that is (nearly) one of the lab's own reference kernels. The references are
    boilerplate to the pairs, so two students who both hand one in share nothing there: each
    such submission is listed on its own."""

    __tablename__ = "similarity_reference_copies"

    id: Mapped[int] = mapped_column(primary_key=True)
    report_id: Mapped[int] = mapped_column(
        ForeignKey("similarity_reports.id", ondelete="CASCADE"), index=True
    )
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    label: Mapped[str] = mapped_column(String(400))
    reference: Mapped[str] = mapped_column(String(200))  # the reference file's name
    share: Mapped[float]  # of the submission's fingerprinted code, the share found in it
    overlap_tokens: Mapped[int]


class EarlierOffering(Base):
    """A course's earlier offering (the same course in an earlier term), linked by someone who
    teaches both: the one thing that lets one course's similarity reports read another
    course's submissions. Seen and removed by the staff of either course."""

    __tablename__ = "earlier_offerings"
    __table_args__ = (
        UniqueConstraint("course_id", "earlier_course_id"),
        CheckConstraint("course_id <> earlier_course_id", name="not_itself"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"), index=True)
    earlier_course_id: Mapped[int] = mapped_column(
        ForeignKey("courses.id", ondelete="CASCADE"), index=True
    )
    linked_by_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), default=None
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


# How a report's job is held and sent (app.jobs.lease): computed in one go by a worker that
# names no holder, so one that started long ago is taken to have lost its worker.
REPORTS = Lease(SimilarityReport, started=ReportState.running.value, holder=False, sent_queue=False)
