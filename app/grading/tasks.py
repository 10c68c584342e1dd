"""Celery tasks; each takes ids and opens its own database sessions."""

from __future__ import annotations

from app.grading.celery_app import GRADE_TASK, celery_app
from app.grading.worker import grade_job


@celery_app.task(name=GRADE_TASK)
def grade(submission_id: int, job_id: int) -> str:
    return grade_job(submission_id, job_id).value
