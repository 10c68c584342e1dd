"""Submissions, their status history, and their grading jobs (a submission may be graded more
than once) with per-case results."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, utcnow
from app.jobs.lease import Lease
from app.submissions.report import StoredReport


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


class JobState(enum.StrEnum):
    queued = "queued"  # committed; the task message is (or will be) on the queue
    started = "started"  # a worker holds it and beats its heartbeat
    waiting_gpu = "waiting_gpu"  # compiled; a GPU worker's sweep picks it up
    done = "done"
    failed = "failed"  # gave up: compile error, retries exhausted, or internal error

    @property
    def is_final(self) -> bool:
        return self in (JobState.done, JobState.failed)


class Priority(enum.IntEnum):
    """Students' uploads and single regrades go to the broker at once; a whole lab's regrade
    waits in the database and is sent a few jobs at a time, only while no student's job waits
    (app.grading.bulk), so it queues behind new uploads on any broker."""

    normal = 0
    background = 1


class GradingJob(Base):
    __tablename__ = "grading_jobs"
    __table_args__ = (Index("ix_grading_jobs_taken", "taken_queue", "taken_sent_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[int] = mapped_column(
        ForeignKey("submissions.id", ondelete="CASCADE"), index=True
    )
    state: Mapped[str] = mapped_column(String(20), default=JobState.queued.value, index=True)
    priority: Mapped[int] = mapped_column(default=Priority.normal.value, server_default="0")
    # How many times a worker has taken this job; a lost job is sent again until max_attempts.
    attempt: Mapped[int] = mapped_column(default=0)
    worker_id: Mapped[str | None] = mapped_column(String(200), default=None)
    queued_at: Mapped[datetime] = mapped_column(default=utcnow)
    # When the task message last went onto the broker (the stamp it carries), and on which
    # queue; None means the send has not happened.
    sent_at: Mapped[datetime | None] = mapped_column(default=None)
    sent_queue: Mapped[str | None] = mapped_column(String(40), default=None)
    # The stamp and queue of the message a worker claimed the job with: the newest such stamp
    # per queue says how far the broker has handed messages out (see sweeper.lost_jobs).
    taken_sent_at: Mapped[datetime | None] = mapped_column(default=None)
    taken_queue: Mapped[str | None] = mapped_column(String(40), default=None)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    compiled_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    heartbeat_at: Mapped[datetime | None] = mapped_column(default=None)
    error: Mapped[str] = mapped_column(Text, default="")
    # The GPU model (routing key, see app.jobs.routing) its run needs; "" for any GPU.
    gpu_model: Mapped[str] = mapped_column(String(200), default="")
    # The content digest of the lab this job was graded against (graders LabSpec.digest), set
    # when a worker compiles it; "" for jobs graded before it was recorded.
    lab_digest: Mapped[str] = mapped_column(String(64), default="", server_default="")
    # Seconds in the queue before a worker took it, compiling, and running (for /metrics).
    wait_seconds: Mapped[float | None] = mapped_column(default=None)
    compile_seconds: Mapped[float | None] = mapped_column(default=None)
    run_seconds: Mapped[float | None] = mapped_column(default=None)
    # The run stage's extras: findings, GPU, stage seconds, the kernel's stdout, the summary
    # (app.submissions.report.StoredReport, as JSON; read it through `stored_report`).
    report: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    @property
    def stored_report(self) -> StoredReport:
        return StoredReport.read(self.report)


class CaseResult(Base):
    """One test case of one grading job; (job, name) is unique so a rerun replaces its rows."""

    __tablename__ = "case_results"
    __table_args__ = (UniqueConstraint("job_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(
        ForeignKey("grading_jobs.id", ondelete="CASCADE"), index=True
    )
    position: Mapped[int] = mapped_column(default=0)
    name: Mapped[str] = mapped_column(String(100))
    sizes: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    hidden: Mapped[bool] = mapped_column(default=False)
    passed: Mapped[bool] = mapped_column(default=False)
    verdict: Mapped[str] = mapped_column(String(40))
    message: Mapped[str] = mapped_column(Text, default="")
    points: Mapped[float] = mapped_column(default=0.0)
    max_points: Mapped[float] = mapped_column(default=0.0)
    # Seeds may use all 64 bits, beyond a signed BIGINT, so they are kept as decimal text.
    seed: Mapped[str] = mapped_column(String(24), default="0")
    wrong_count: Mapped[int] = mapped_column(default=0)
    first_wrong_index: Mapped[list[int] | None] = mapped_column(JSON, default=None)
    expected: Mapped[float | None] = mapped_column(default=None)
    got: Mapped[float | None] = mapped_column(default=None)
    max_abs_error: Mapped[float | None] = mapped_column(default=None)
    max_rel_error: Mapped[float | None] = mapped_column(default=None)
    timing: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    reference_timings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


# How a grading job is held and sent (app.jobs.lease).
GRADING = Lease(GradingJob)
