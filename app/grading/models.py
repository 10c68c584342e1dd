"""Reference kernels' timings, kept per GPU model and lab version and shared by every worker."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, String, UniqueConstraint
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
