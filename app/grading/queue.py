"""Sending jobs to the broker, after the rows they name are committed."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import update

from app.core.database import session_scope, utcnow
from app.grading.celery_app import GRADE_TASK, QUEUE
from app.grading.models import GradingJob, JobState

log = logging.getLogger(__name__)


def stamp_send(job: GradingJob, *, queue: str = QUEUE) -> datetime:
    """Note on a job, in the transaction that commits it, that it is about to be sent.

    Spares the web process a second write per upload (on SQLite, a second turn at the write
    lock); pass the stamp to `send_job`, which takes the note back if the send fails.
    """
    job.sent_at = utcnow()
    job.sent_queue = queue
    return job.sent_at


def send_job(
    *, submission_id: int, job_id: int, queue: str = QUEUE, stamped_at: datetime | None = None
) -> bool:
    """Put a job on the queue and note when; False (logged) if the broker refused it.

    The message carries its send stamp and queue; the worker that claims the job records them
    (see sweeper.lost_jobs). A job that was not sent stays `queued` with no `sent_at` (its
    `sent_queue` still saying where it belongs), and the sweeper sends it later.
    """
    from app.grading.celery_app import celery_app

    sent_at = stamped_at or utcnow()
    try:
        celery_app.send_task(
            GRADE_TASK,
            args=[submission_id, job_id],
            kwargs={"sent_at": sent_at.isoformat(), "queue": queue},
            queue=queue,
        )
    except Exception:
        log.exception(
            "could not send job %s of submission %s; the sweeper retries", job_id, submission_id
        )
        if stamped_at is not None:
            _note(job_id, stamped_at, sent_at=None, queue=queue)
        return False
    if stamped_at is None:
        _note(job_id, None, sent_at=sent_at, queue=queue)
    return True


def _note(
    job_id: int, stamped_at: datetime | None, *, sent_at: datetime | None, queue: str
) -> None:
    query = update(GradingJob).where(
        GradingJob.id == job_id, GradingJob.state == JobState.queued.value
    )
    if stamped_at is not None:
        query = query.where(GradingJob.sent_at == stamped_at)
    try:
        with session_scope() as session:
            session.execute(query.values(sent_at=sent_at, sent_queue=queue))
    except Exception:
        # Without the note the sweeper sends the job once more (harmless), or not at all
        # until the queue has moved past it. Failing here would tell the student a stored
        # submission was not taken.
        log.exception("job %s: its send could not be noted", job_id)


def waiting_in_broker(queues: Iterable[str]) -> dict[str, int] | None:
    """Messages waiting on these queues, not yet handed to a worker; None when the broker
    does not answer."""
    from app.grading.celery_app import celery_app

    try:
        with celery_app.connection_for_read() as connection:
            channel = connection.default_channel
            return {
                queue: channel.queue_declare(
                    queue=queue, durable=True, auto_delete=False
                ).message_count
                for queue in set(queues)
            }
    except Exception:
        log.warning("could not ask the broker how many jobs wait", exc_info=True)
        return None
