"""Sending jobs to the broker, after the rows they name are committed."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Update, update

from app.core.database import session_scope, utcnow
from app.jobs.celery_app import GRADE_TASK, QUEUE
from app.submissions.models import GradingJob, JobState

log = logging.getLogger(__name__)


def stamp_send(job: GradingJob, *, queue: str = QUEUE) -> datetime:
    """Note on a job, in the transaction that commits it, that it is about to be sent.

    Spares the web process a second write per upload (on SQLite, a second turn at the write
    lock); pass the stamp to `send_job` or the sender (app.grading.sender), which take the
    note back if the send fails.
    """
    job.sent_at = utcnow()
    job.sent_queue = queue
    return job.sent_at


# Stamps this close may reach the broker out of their order (each is taken just before its
# commit, and sent after it), so a queue is taken to have moved past a job only when a worker
# claimed a job stamped this much later (sweeper.lost_jobs). Where a job waited longer than
# this between its stamp and its send (a slow broker), it may be judged lost while its message
# still waits, and sent once more: harmless, since the worker that claims a job first holds it.
# A larger margin sends fewer such copies, and finds a job that the broker lost later: a job
# sent just before a restart is found once the workers reach the uploads sent this much after.
STAMP_MARGIN = timedelta(seconds=1)


@dataclass(frozen=True)
class Send:
    """A committed job, stamped for its send, and the queue it goes to."""

    submission_id: int
    job_id: int
    queue: str
    stamped_at: datetime


def _publish(*, submission_id: int, job_id: int, queue: str, sent_at: datetime) -> None:
    from app.jobs.celery_app import celery_app

    celery_app.send_task(
        GRADE_TASK,
        args=[submission_id, job_id],
        kwargs={"sent_at": sent_at.isoformat(), "queue": queue},
        queue=queue,
    )


def send_job(
    *, submission_id: int, job_id: int, queue: str = QUEUE, stamped_at: datetime | None = None
) -> bool:
    """Put a job on the queue and note when; False (logged) if the broker refused it.

    The message carries its send stamp and queue; the worker that claims the job records them
    (see sweeper.lost_jobs). A job that was not sent stays `queued` with no `sent_at` (its
    `sent_queue` still saying where it belongs), and the sweeper sends it later.
    """
    sent_at = stamped_at or utcnow()
    try:
        _publish(submission_id=submission_id, job_id=job_id, queue=queue, sent_at=sent_at)
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


def send_in_order(sends: Sequence[Send]) -> list[int]:
    """Send stamped jobs in this order; return the ids sent.

    From the first send the broker refuses, the stamps of that job and of every job after it
    are taken back without trying them: a broker that is down costs one attempt, not one per
    job. A job taken back counts as never sent, and the sweeper sends it.
    """
    sent: list[int] = []
    for n, item in enumerate(sends):
        try:
            _publish(
                submission_id=item.submission_id,
                job_id=item.job_id,
                queue=item.queue,
                sent_at=item.stamped_at,
            )
        except Exception as exc:
            log.warning(
                "the broker refused job %s (%s); %d jobs are left for the sweeper to send",
                item.job_id,
                exc,
                len(sends) - n,
            )
            take_back(sends[n:])
            break
        sent.append(item.job_id)
    return sent


def take_back(sends: Sequence[Send]) -> None:
    """Note these stamped jobs as not sent (each only while its stamp is the one given)."""
    try:
        with session_scope() as session:
            for item in sends:
                session.execute(
                    _still_queued(item.job_id, item.stamped_at)
                    .values(sent_at=None, sent_queue=item.queue)
                    .execution_options(synchronize_session=False)
                )
    except Exception:
        # Their stamps stay: the sweeper finds them lost once their queue is empty or has
        # moved past them, later than it would find them unsent.
        log.exception("could not note %d jobs as not sent", len(sends))


def _still_queued(job_id: int, stamped_at: datetime | None) -> Update:
    """An update of the job while it is queued and (given a stamp) still carries that stamp."""
    query = update(GradingJob).where(
        GradingJob.id == job_id, GradingJob.state == JobState.queued.value
    )
    if stamped_at is not None:
        query = query.where(GradingJob.sent_at == stamped_at)
    return query


def _note(
    job_id: int, stamped_at: datetime | None, *, sent_at: datetime | None, queue: str
) -> None:
    try:
        with session_scope() as session:
            session.execute(
                _still_queued(job_id, stamped_at).values(sent_at=sent_at, sent_queue=queue)
            )
    except Exception:
        # Without the note the sweeper sends the job once more (harmless), or not at all
        # until the queue has moved past it. Failing here would tell the student a stored
        # submission was not taken.
        log.exception("job %s: its send could not be noted", job_id)


def waiting_in_broker(queues: Iterable[str]) -> dict[str, int] | None:
    """Messages waiting on these queues, not yet handed to a worker; None when the broker
    does not answer."""
    from app.jobs.celery_app import celery_app

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
