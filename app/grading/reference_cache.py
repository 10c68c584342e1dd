"""Reference timings kept in the database, shared by every worker.

Kept per (GPU model, driver, lab content digest, case, reference). The worker hands the
fresh-enough ones to the engine, which reuses each unless the GPU's clock or temperature now
differs markedly (graders.timing.references), and stores what the engine measured anew.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.grading.models import ReferenceTiming


def kept_timings(
    session: Session,
    *,
    gpu: str,
    driver: str,
    digest: str,
    case: str,
    max_age_seconds: float,
    now: datetime | None = None,
) -> dict[str, dict[str, Any]]:
    """Reference name -> TimingStats dict, for the timings younger than `max_age_seconds`."""
    if not gpu or not digest or max_age_seconds <= 0:
        return {}
    since = (now or utcnow()) - timedelta(seconds=max_age_seconds)
    rows = session.scalars(
        select(ReferenceTiming).where(
            ReferenceTiming.gpu_name == gpu,
            ReferenceTiming.driver == driver,
            ReferenceTiming.lab_digest == digest,
            ReferenceTiming.case_name == case,
            ReferenceTiming.measured_at >= since,
        )
    ).all()
    return {row.reference: dict(row.stats) for row in rows}


def keep_timings(
    session: Session,
    *,
    gpu: str,
    driver: str,
    digest: str,
    case: str,
    measured: dict[str, dict[str, Any]],
    now: datetime | None = None,
) -> None:
    """Store (or replace) each measured reference timing; the caller commits."""
    if not gpu or not digest:
        return
    when = now or utcnow()
    for reference, stats in measured.items():
        key = {
            "gpu_name": gpu[:200],
            "driver": driver[:64],
            "lab_digest": digest,
            "case_name": case,
            "reference": reference,
        }
        row = session.scalar(select(ReferenceTiming).filter_by(**key))
        if row is None:
            try:
                with session.begin_nested():  # another worker may store the same key first
                    session.add(ReferenceTiming(**key, stats=dict(stats), measured_at=when))
                continue
            except IntegrityError:
                row = session.scalar(select(ReferenceTiming).filter_by(**key))
                if row is None:
                    raise
        row.stats = dict(stats)
        row.measured_at = when
