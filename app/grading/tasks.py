"""Celery tasks; each takes ids and opens its own database sessions."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from app.grading.worker import grade_job
from app.jobs.celery_app import GRADE_TASK, celery_app


# A database that is briefly locked or away is worth a few retries before the sweeper's turn.
@celery_app.task(
    name=GRADE_TASK,
    autoretry_for=(OperationalError, InterfaceError, PoolTimeout),
    retry_backoff=True,
    max_retries=5,
)
def grade(
    submission_id: int, job_id: int, sent_at: str | None = None, queue: str | None = None
) -> str:
    # `sent_at` and `queue` say which send this message is (absent in older messages).
    stamp = datetime.fromisoformat(sent_at) if sent_at else None
    return grade_job(submission_id, job_id, taken=(stamp, queue)).value
