"""The workers the fleet borrows from a cluster's scheduler (app.fleet.autoscale), and the lease
of the loop that borrows them (the registry of running workers is app.jobs.models')."""

from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, utcnow


class BorrowedState(enum.StrEnum):
    pending = "pending"  # submitted; the scheduler has not started it
    starting = "starting"  # running on a node; its worker has not registered yet
    running = "running"  # its worker registered
    draining = "draining"  # its worker was asked to finish its task and exit
    ended = "ended"  # the scheduler lists it as finished (or no longer lists it)


class BorrowedWorker(Base):
    """One worker the fleet asked a scheduler for: a Slurm job running `kernelgrader worker`."""

    __tablename__ = "borrowed_workers"
    __table_args__ = (UniqueConstraint("backend", "job_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    backend: Mapped[str] = mapped_column(String(20))  # "slurm"
    job_id: Mapped[str] = mapped_column(String(64))  # the scheduler's id for it
    # The GPU model (routing key, app.jobs.routing) it was asked for; "" : any GPU.
    gpu_model: Mapped[str] = mapped_column(String(200), default="")
    state: Mapped[str] = mapped_column(String(20), default=BorrowedState.pending.value, index=True)
    reason: Mapped[str] = mapped_column(Text, default="")  # why it was asked for
    submitted_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    ended_at: Mapped[datetime | None] = mapped_column(default=None, index=True)
    # What the scheduler last said: its state ("PENDING", "TIMEOUT") and reason ("Priority").
    scheduler_state: Mapped[str] = mapped_column(String(40), default="")
    scheduler_reason: Mapped[str] = mapped_column(String(200), default="")
    node: Mapped[str] = mapped_column(String(255), default="")
    # Its worker, once registered: name (Worker.name), when, and whether it can run kernels.
    worker_name: Mapped[str] = mapped_column(String(255), default="")
    registered_at: Mapped[datetime | None] = mapped_column(default=None)
    can_run: Mapped[bool | None] = mapped_column(default=None)
    worker_note: Mapped[str] = mapped_column(Text, default="")
    drain_at: Mapped[datetime | None] = mapped_column(default=None)
    cancel_at: Mapped[datetime | None] = mapped_column(default=None)
    # Why it was drained or cancelled, then why it ended, in sentences.
    end_reason: Mapped[str] = mapped_column(Text, default="")

    @property
    def key(self) -> str:
        return f"{self.backend}:{self.job_id}"


class FleetRunner(Base):
    """The lease of the one `kernelgrader fleet run` loop that acts for a backend."""

    __tablename__ = "fleet_runners"

    id: Mapped[int] = mapped_column(primary_key=True)
    backend: Mapped[str] = mapped_column(String(20), unique=True)
    holder: Mapped[str] = mapped_column(String(255))  # host:pid of the loop
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    ticked_at: Mapped[datetime] = mapped_column(default=utcnow)
    # What its latest pass did, or why it failed, in a sentence.
    note: Mapped[str] = mapped_column(Text, default="")
