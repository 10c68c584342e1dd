"""Sending jobs to the broker, after the rows they name are committed."""

from __future__ import annotations

import logging

from sqlalchemy import update

from app.core.database import session_scope, utcnow
from app.grading.celery_app import GRADE_TASK, QUEUE
from app.grading.models import GradingJob, JobState

log = logging.getLogger(__name__)


def send_job(*, submission_id: int, job_id: int, queue: str = QUEUE) -> bool:
    """Put a job on the queue and note when; False (logged) if the broker refused it.

    A job that was not sent stays `queued` with no `sent_at`, and the sweeper sends it later.
    """
    from app.grading.celery_app import celery_app

    try:
        celery_app.send_task(GRADE_TASK, args=[submission_id, job_id], queue=queue)
    except Exception:
        log.exception(
            "could not send job %s of submission %s; the sweeper retries", job_id, submission_id
        )
        return False
    try:
        with session_scope() as session:
            session.execute(
                update(GradingJob)
                .where(GradingJob.id == job_id, GradingJob.state == JobState.queued.value)
                .values(sent_at=utcnow())
            )
    except Exception:
        # The job is on the queue; without the note the sweeper sends it once more, which is
        # harmless. Failing here would tell the student a stored submission was not taken.
        log.exception("job %s was sent but its send time was not noted", job_id)
    return True
