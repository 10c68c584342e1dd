"""Sending jobs to the broker, after the rows they name are committed.

Every kind of job (a grading, a profile, a similarity report) is sent the same way: its row
is stamped in the transaction that commits it (`sent_at`, the stamp the message carries, and
the queue it belongs on), and the message goes out once that commits: from this process's
sender thread for what a request or a worker's job queued (`send_after_commit`, app.jobs.sender),
or in order from the workers' sweep. A send the broker refuses takes its stamp back (the row
then reads "not sent"), and the sweep sends it again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from app.core.database import session_scope
from app.jobs import celery_app as celery_module
from app.jobs.lease import Lease

log = logging.getLogger(__name__)

# Stamps this close may reach the broker out of their order (each is taken just before its
# commit, and sent after it), so a queue is taken to have moved past a job only when a worker
# claimed a job stamped this much later (grading's sweep, lost_jobs). Where a job waited
# longer than this between its stamp and its send (a slow broker), it may be judged lost while
# its message still waits, and sent once more: harmless, since the worker that claims a job
# first holds it. A larger margin sends fewer such copies, and finds a job that the broker
# lost later: a job sent just before a restart is found once the workers reach the uploads
# sent this much after.
STAMP_MARGIN = timedelta(seconds=1)


@dataclass(frozen=True)
class Send:
    """A committed job's message: its task and arguments, the queue, the stamp it carries,
    and the job's row (its lease and id), whose stamp is taken back if the broker refuses it."""

    task: str
    args: tuple[Any, ...]
    queue: str
    stamped_at: datetime
    lease: Lease
    job_id: int
    kwargs: Mapping[str, Any] = field(default_factory=dict)


def publish(send: Send) -> None:
    """Put the message on the broker (raises what the broker raised)."""
    # Looked up at each send: the scaled tests reroute the module's app to another broker.
    celery_module.celery_app.send_task(
        send.task, args=list(send.args), kwargs=dict(send.kwargs), queue=send.queue
    )


def send_in_order(sends: Sequence[Send]) -> list[int]:
    """Send stamped jobs in this order; return the ids sent.

    From the first send the broker refuses, the stamps of that job and of every job after it
    are taken back without trying them: a broker that is down costs one attempt, not one per
    job. A job taken back counts as never sent, and the sweep sends it.
    """
    sent: list[int] = []
    for n, item in enumerate(sends):
        try:
            publish(item)
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
                item.lease.stamp(
                    session, item.job_id, old=item.stamped_at, new=None, queue=item.queue
                )
    except Exception:
        # Their stamps stay: the sweeper finds them lost once their queue is empty or has
        # moved past them, later than it would find them unsent.
        log.exception("could not note %d jobs as not sent", len(sends))


def waiting_in_broker(queues: Iterable[str]) -> dict[str, int] | None:
    """Messages waiting on these queues, not yet handed to a worker; None when the broker
    does not answer."""
    try:
        with celery_module.celery_app.connection_for_read() as connection:
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
