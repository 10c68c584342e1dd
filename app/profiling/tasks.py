"""The Celery task of a profiling job; it takes an id and opens its own sessions."""

from __future__ import annotations

from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from app.jobs.celery_app import PROFILE_TASK, celery_app
from app.profiling.jobs import profile_job


@celery_app.task(
    name=PROFILE_TASK,
    autoretry_for=(OperationalError, InterfaceError, PoolTimeout),
    retry_backoff=True,
    max_retries=5,
)
def profile(profile_id: int, sent_at: str | None = None, queue: str | None = None) -> str:
    # `sent_at` and `queue` say which send this message is (for the log).
    return profile_job(profile_id)
