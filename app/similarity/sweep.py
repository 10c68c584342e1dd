"""The workers' sweep for similarity reports: one whose send failed or whose message was lost
is sent again; one whose worker died while computing is queued again (or, out of attempts,
failed with a sentence)."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from app.core.settings import get_settings
from app.similarity.models import ReportState, SimilarityReport

# A report computing longer than this is taken as lost with its worker.
RUNNING_AT_MOST = timedelta(hours=1)


def reports_to_send(session: Session, *, now: datetime) -> list[int]:
    """Stamp and return the reports to send once the sweep's transaction commits."""
    settings = get_settings()
    resend_before = now - timedelta(seconds=settings.resend_sent_after_seconds)
    stale_before = now - RUNNING_AT_MOST
    for report in session.scalars(
        select(SimilarityReport).where(
            SimilarityReport.state == ReportState.running.value,
            SimilarityReport.started_at < stale_before,
        )
    ).all():
        if report.attempt >= settings.max_attempts:
            values = {
                "state": ReportState.failed.value,
                "finished_at": now,
                "error": f"its worker stopped {report.attempt} times; ask for a new report",
            }
        else:
            values = {"state": ReportState.queued.value, "sent_at": None}
        session.execute(
            update(SimilarityReport)
            .where(
                SimilarityReport.id == report.id,
                SimilarityReport.state == ReportState.running.value,
                SimilarityReport.started_at == report.started_at,
            )
            .values(**values)
            .execution_options(synchronize_session=False)
        )
    picked = []
    for report in session.scalars(
        select(SimilarityReport).where(
            SimilarityReport.state == ReportState.queued.value,
            or_(SimilarityReport.sent_at.is_(None), SimilarityReport.sent_at < resend_before),
        )
    ).all():
        # Conditional, since every worker sweeps: one of them sends it.
        taken = session.execute(
            update(SimilarityReport)
            .where(
                SimilarityReport.id == report.id,
                SimilarityReport.state == ReportState.queued.value,
                SimilarityReport.sent_at.is_(None)
                if report.sent_at is None
                else SimilarityReport.sent_at == report.sent_at,
            )
            .values(sent_at=now)
            .execution_options(synchronize_session=False)
        )
        if taken.rowcount == 1:  # type: ignore[attr-defined]
            picked.append(report.id)
    return picked
