"""The workers table: one row per worker process that registered (app.jobs.workers)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, utcnow


class Worker(Base):
    __tablename__ = "workers"

    id: Mapped[int] = mapped_column(primary_key=True)
    # host:pid, the same name its grading jobs carry in GradingJob.worker_id.
    name: Mapped[str] = mapped_column(String(255), unique=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int]
    # CUDA_VISIBLE_DEVICES of the process ("0"); "" for a worker given no particular GPU.
    gpu: Mapped[str] = mapped_column(String(100), default="")
    gpu_model: Mapped[str] = mapped_column(String(200), default="")
    arch: Mapped[str] = mapped_column(String(20), default="")
    can_compile: Mapped[bool] = mapped_column(default=False)
    can_run: Mapped[bool] = mapped_column(default=False)
    # Why it cannot run kernels (or compile), in a sentence; "" when it can do both.
    note: Mapped[str] = mapped_column(Text, default="")
    queues: Mapped[list[str]] = mapped_column(JSON, default=list)
    version: Mapped[str] = mapped_column(String(40), default="")
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    stopped_at: Mapped[datetime | None] = mapped_column(default=None)
    # The GPU's state at its latest timed section, as the run stage recorded it.
    timing_temperature_c: Mapped[int | None] = mapped_column(default=None)
    timing_sm_clock_mhz: Mapped[int | None] = mapped_column(default=None)
    timed_at: Mapped[datetime | None] = mapped_column(default=None)
    # The scheduler's job this worker runs in, "slurm:1234" (BorrowedWorker.key); "" for a
    # worker someone started.
    fleet_job: Mapped[str] = mapped_column(String(100), default="", server_default="")
    # When it last held a task (written at its beats): how long it has been idle.
    busy_at: Mapped[datetime | None] = mapped_column(default=None)
    # Asked to drain: finish the task in hand, take no new one, and exit.
    drain_at: Mapped[datetime | None] = mapped_column(default=None)
