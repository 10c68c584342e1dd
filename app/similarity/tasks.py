"""The similarity report's Celery task; it takes an id and opens its own sessions."""

from __future__ import annotations

from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from app.jobs.celery_app import SIMILARITY_TASK, celery_app
from app.similarity.compute import compute_report


@celery_app.task(
    name=SIMILARITY_TASK,
    autoretry_for=(OperationalError, InterfaceError, PoolTimeout),
    retry_backoff=True,
    max_retries=5,
)
def compute(report_id: int) -> str:
    return compute_report(report_id)
