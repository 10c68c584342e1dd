"""A submission's profiling jobs (each one profile), their report files, and the references'
profiles kept per GPU model and lab version."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, utcnow
from app.jobs.lease import Lease


class ProfileState(enum.StrEnum):
    queued = "queued"  # waits, held back until no student's grading waits (app.profiling.sweep)
    started = "started"  # a GPU worker holds it and beats its heartbeat
    done = "done"  # profiled: `summary` holds what ncu measured
    unavailable = "unavailable"  # this worker cannot profile (no ncu, no counters, MIG)
    failed = "failed"  # the profile did not come: `message` says why

    @property
    def is_final(self) -> bool:
        return self in (ProfileState.done, ProfileState.unavailable, ProfileState.failed)


class KernelProfile(Base):
    """One profiling of one submission (after its grading, or asked for by staff)."""

    __tablename__ = "kernel_profiles"
    __table_args__ = (Index("ix_kernel_profiles_state_sent", "state", "sent_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[int] = mapped_column(
        ForeignKey("submissions.id", ondelete="CASCADE"), index=True
    )
    # The grading it followed (None when staff asked for it).
    grading_job_id: Mapped[int | None] = mapped_column(
        ForeignKey("grading_jobs.id", ondelete="SET NULL"), default=None
    )
    requested_by_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), default=None
    )
    state: Mapped[str] = mapped_column(String(20), default=ProfileState.queued.value)
    attempt: Mapped[int] = mapped_column(default=0)
    worker_id: Mapped[str | None] = mapped_column(String(200), default=None)
    queued_at: Mapped[datetime] = mapped_column(default=utcnow)
    # When its message went onto the broker, and on which queue; None: held back.
    sent_at: Mapped[datetime | None] = mapped_column(default=None)
    sent_queue: Mapped[str | None] = mapped_column(String(80), default=None)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    heartbeat_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    # The GPU model key it must run on (app.jobs.routing; "" for any), and what it ran on.
    gpu_model: Mapped[str] = mapped_column(String(200), default="")
    gpu_name: Mapped[str] = mapped_column(String(200), default="")
    lab_digest: Mapped[str] = mapped_column(String(64), default="")
    case_name: Mapped[str] = mapped_column(String(100), default="")
    ncu_version: Mapped[str] = mapped_column(String(40), default="")
    seconds: Mapped[float | None] = mapped_column(default=None)
    # A sentence for the page where it is unavailable or failed.
    message: Mapped[str] = mapped_column(Text, default="")
    # What went wrong on our side, for staff and the log.
    error: Mapped[str] = mapped_column(Text, default="")
    # graders.profile.extract's summary of the submission's launches.
    summary: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # Size of the .ncu-rep file, and whether it is still kept (older ones are pruned).
    report_bytes: Mapped[int] = mapped_column(default=0)
    report_kept: Mapped[bool] = mapped_column(default=False)


class ProfileReport(Base):
    """The .ncu-rep file of a profile, apart so that lists never load it."""

    __tablename__ = "profile_reports"

    profile_id: Mapped[int] = mapped_column(
        ForeignKey("kernel_profiles.id", ondelete="CASCADE"), primary_key=True
    )
    data: Mapped[bytes] = mapped_column(LargeBinary)


class ReferenceProfile(Base):
    """A reference kernel's profile on one GPU model, for one version of a lab and one case:
    profiled once, in the first profiling job that needed it, and kept."""

    __tablename__ = "reference_profiles"
    __table_args__ = (
        UniqueConstraint(
            "gpu_name", "lab_digest", "case_name", "reference", name="uq_reference_profiles_key"
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    gpu_name: Mapped[str] = mapped_column(String(200))
    lab_digest: Mapped[str] = mapped_column(String(64))
    case_name: Mapped[str] = mapped_column(String(100))
    reference: Mapped[str] = mapped_column(String(100))
    ncu_version: Mapped[str] = mapped_column(String(40), default="")
    summary: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    profiled_at: Mapped[datetime] = mapped_column(default=utcnow)


# How a profiling job is held and sent (app.jobs.lease).
PROFILES = Lease(KernelProfile)
