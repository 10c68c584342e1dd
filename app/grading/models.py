"""What workers keep for one another: reference kernels' timings, per GPU model and lab
version, and compiled programs waiting for a GPU worker."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, LargeBinary, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, utcnow


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


class KeptProgram(Base):
    """A compiled submission kept for the GPU worker that runs it.

    A worker without the GPU a job needs compiles it, records the verdict and leaves the job
    waiting for a GPU worker; the machine code is kept here so that worker runs it without
    compiling again. Kept only while the job waits or runs, and used only where `recipe` (the
    architecture, the NVRTC version, the lab's version and the compile options) is the one the
    GPU worker would compile with itself.
    """

    __tablename__ = "kept_programs"

    job_id: Mapped[int] = mapped_column(
        ForeignKey("grading_jobs.id", ondelete="CASCADE"), primary_key=True
    )
    recipe: Mapped[str] = mapped_column(String(300))
    # graders.results.CompileResult without its cubin, as JSON.
    result: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    cubin: Mapped[bytes] = mapped_column(LargeBinary)
    kept_at: Mapped[datetime] = mapped_column(default=utcnow)
