"""Grading jobs (a submission may be graded more than once) and their per-case results."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, utcnow


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
    # The run stage's extras: findings, GPU, stage seconds, the kernel's stdout, the summary.
    report: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


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


class ReferenceTiming(Base):
    """A reference kernel's timing on one GPU model and driver, for one version of a lab.

    Shared by every worker: a reference is timed once and reused until it is older than the
    configured age, or until the GPU's clock or temperature at timing differs markedly (the
    run stage decides that, graders.timing.references).
    """

    __tablename__ = "reference_timings"
    __table_args__ = (
        UniqueConstraint(
            "gpu_name",
            "driver",
            "lab_digest",
            "case_name",
            "reference",
            name="uq_reference_timings_key",
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    gpu_name: Mapped[str] = mapped_column(String(200))
    driver: Mapped[str] = mapped_column(String(64))
    lab_digest: Mapped[str] = mapped_column(String(64))
    case_name: Mapped[str] = mapped_column(String(100))
    reference: Mapped[str] = mapped_column(String(100))
    # graders.results.TimingStats as JSON: median, spread, repetitions, clock, temperature.
    stats: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    measured_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
