"""The workers' sweep for similarity reports: one whose send failed or whose message was lost
is sent again; one whose worker died while computing is queued again (or, out of attempts,
failed with a sentence)."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import or_, select
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from app.core.settings import get_settings
from app.jobs.send import Send
from app.similarity.models import REPORTS, ReportState, SimilarityReport
from app.similarity.service import report_message

# A report computing longer than this is taken as lost with its worker.
RUNNING_AT_MOST = timedelta(hours=1)


def reports_to_send(session: Session, *, now: datetime) -> list[Send]:
    """Stamp the reports to send; their messages, for the caller to send once the sweep's
    transaction commits."""
    settings = get_settings()
    resend_before = now - timedelta(seconds=settings.resend_sent_after_seconds)
    REPORTS.take_back_stale(
        session,
        stale_before=now - RUNNING_AT_MOST,
        max_attempts=settings.max_attempts,
        failed=lambda report: {
            "finished_at": now,
            "error": f"its worker stopped {report.attempt} times; ask for a new report",
        },
        queued={},
    )
    picked = []
    for report in session.scalars(
        select(SimilarityReport).where(
            SimilarityReport.state == ReportState.queued.value,
            or_(SimilarityReport.sent_at.is_(None), SimilarityReport.sent_at < resend_before),
        )
    ).all():
        # Conditional, since every worker sweeps: one of them sends it.
        if REPORTS.stamp(session, report.id, old=report.sent_at, new=now):
            set_committed_value(report, "sent_at", now)
            picked.append(report_message(report))
    return picked
