"""Sending jobs to the broker, after the rows they name are committed."""

from __future__ import annotations

import logging

from sqlalchemy import update

from app.core.database import session_scope, utcnow
from app.grading.celery_app import GPU_QUEUE, GRADE_TASK, QUEUE
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


def waiting_in_broker() -> dict[str, int] | None:
    """Messages waiting on each grading queue, not yet handed to a worker; None when the
    broker does not answer."""
    from app.grading.celery_app import celery_app

    try:
        with celery_app.connection_for_read() as connection:
            channel = connection.default_channel
            return {
                queue: channel.queue_declare(
                    queue=queue, durable=True, auto_delete=False
                ).message_count
                for queue in (QUEUE, GPU_QUEUE)
            }
    except Exception:
        log.warning("could not ask the broker how many jobs wait", exc_info=True)
        return None
