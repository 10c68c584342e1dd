"""Finds jobs the queue lost and sends them again; run periodically by every worker."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from app.core.database import session_scope, utcnow
from app.core.settings import get_settings
from app.grading.celery_app import GPU_QUEUE, QUEUE
from app.grading.models import GradingJob, JobState
from app.grading.queue import send_job, waiting_in_broker
from app.grading.worker import NOT_YOUR_FAULT
from app.submissions.models import Status, Submission
from app.submissions.service import set_status

log = logging.getLogger(__name__)


@dataclass
class SweepReport:
    resent: list[int] = field(default_factory=list)  # job ids never sent, sent now
    lost: list[int] = field(default_factory=list)  # sent but never started: sent again
    requeued: list[int] = field(default_factory=list)  # lost jobs sent again
    failed: list[int] = field(default_factory=list)  # lost jobs out of attempts
    to_gpu: list[int] = field(default_factory=list)  # compiled jobs handed to a GPU worker

    def __bool__(self) -> bool:
        return bool(self.resent or self.lost or self.requeued or self.failed or self.to_gpu)


def sweep(*, now: datetime | None = None, has_gpu: bool = False) -> SweepReport:
    settings = get_settings()
    now = now or utcnow()
    report = SweepReport()
    unsent_before = now - timedelta(seconds=settings.resend_after_seconds)
    overdue_before = now - timedelta(seconds=settings.resend_unstarted_after_seconds)
    long_before = now - timedelta(seconds=settings.resend_sent_after_seconds)
    stale_before = now - timedelta(seconds=settings.heartbeat_timeout_seconds)
    sends: list[tuple[int, int, str, datetime | None]] = []
    with session_scope() as session:
        # Committed but not sent: the send after the commit failed and took its stamp back.
        # (A web process that died between its commit and its send left a stamp: such a job
        # is found as lost, below.)
        for job in session.scalars(
            select(GradingJob).where(
                GradingJob.state == JobState.queued.value,
                GradingJob.sent_at.is_(None),
                GradingJob.queued_at < unsent_before,
            )
        ).all():
            stamp = _restamp(session, job)
            if stamp is not None:
                sends.append((job.submission_id, job.id, QUEUE, stamp))
                report.resent.append(job.id)
        # Sent, and still not started a while later: lost by the broker (restarted without
        # persistence), or taken by a worker that died before claiming it. Judged by the
        # jobs' own rows, not by what the broker says it holds.
        for job in lost_jobs(
            session,
            overdue_before=overdue_before,
            long_before=long_before,
            margin=timedelta(seconds=settings.resend_unstarted_after_seconds),
        ):
            if job.id in report.resent:
                continue  # just sent by the step above
            stamp = _restamp(session, job)
            if stamp is not None:
                sends.append((job.submission_id, job.id, QUEUE, stamp))
                report.lost.append(job.id)
        # Held by a worker that stopped beating: send again, or give up after max_attempts.
        for job in session.scalars(
            select(GradingJob).where(
                GradingJob.state == JobState.started.value, GradingJob.heartbeat_at < stale_before
            )
        ).all():
            submission = session.get_one(Submission, job.submission_id)
            if job.attempt >= settings.max_attempts:
                moved = _move(
                    session, job, JobState.started, JobState.failed, stale_before=stale_before
                )
                if moved:
                    job.finished_at = now
                    job.error = f"worker {job.worker_id} stopped after {job.attempt} attempts"
                    set_status(session, submission, Status.error, NOT_YOUR_FAULT)
                    report.failed.append(job.id)
                continue
            if _move(session, job, JobState.started, JobState.queued, stale_before=stale_before):
                job.queued_at = now
                job.worker_id = None
                set_status(
                    session,
                    submission,
                    Status.queued,
                    f"The worker grading it stopped responding, so it was queued again "
                    f"(attempt {job.attempt + 1} of {settings.max_attempts}).",
                )
                sends.append((job.submission_id, job.id, QUEUE, None))
                report.requeued.append(job.id)
        if has_gpu:
            for job in session.scalars(
                select(GradingJob).where(GradingJob.state == JobState.waiting_gpu.value)
            ).all():
                if _move(session, job, JobState.waiting_gpu, JobState.queued):
                    job.queued_at = now
                    sends.append((job.submission_id, job.id, GPU_QUEUE, None))
                    report.to_gpu.append(job.id)
    # Send only once the state changes are committed, so a fast worker finds them.
    for submission_id, job_id, queue, stamp in sends:
        send_job(submission_id=submission_id, job_id=job_id, queue=queue, stamped_at=stamp)
    return report


def _restamp(session: Session, job: GradingJob) -> datetime | None:
    """Stamp a queued job for its next send, unless another sweeper did since it was read.

    Every worker sweeps; the conditional write lets one of them send the job, not each.
    """
    stamp = utcnow()
    moved = session.execute(
        update(GradingJob)
        .where(
            GradingJob.id == job.id,
            GradingJob.state == JobState.queued.value,
            GradingJob.sent_at.is_(None)
            if job.sent_at is None
            else GradingJob.sent_at == job.sent_at,
        )
        .values(sent_at=stamp, sent_queue=QUEUE)
        .execution_options(synchronize_session=False)
    )
    if moved.rowcount != 1:  # type: ignore[attr-defined]
        return None
    set_committed_value(job, "sent_at", stamp)
    set_committed_value(job, "sent_queue", QUEUE)
    return stamp


def lost_jobs(
    session: Session, *, overdue_before: datetime, long_before: datetime, margin: timedelta
) -> list[GradingJob]:
    """Queued jobs sent before `overdue_before` that no worker can still be about to take.

    A job waiting behind a long queue is not lost, so an overdue job counts as lost only when
    its queue has moved past it (a worker claimed a job with a message stamped `margin` or
    more after this one's, on that queue: the broker hands messages out oldest first, so this
    job's message was handed out too, or lost), or its queue holds no message at all; and
    whatever either says, once it was sent before `long_before`. The stamps compared are
    those the messages carry, so a second copy of a job taken early says nothing about the
    jobs sent between its copies. The margin covers stamps taken a little before the send
    (at the commit), which may reach the broker out of their order.
    """
    overdue = list(
        session.scalars(
            select(GradingJob)
            .where(GradingJob.state == JobState.queued.value, GradingJob.sent_at < overdue_before)
            .order_by(GradingJob.sent_at)
        )
    )
    if not overdue:
        return []
    passed: dict[str | None, datetime] = {
        queue: stamp
        for queue, stamp in session.execute(
            select(GradingJob.taken_queue, func.max(GradingJob.taken_sent_at))
            .where(GradingJob.taken_queue.is_not(None))
            .group_by(GradingJob.taken_queue)
        )
        if stamp is not None
    }

    def moved_past(job: GradingJob) -> bool:
        if job.sent_at is None:
            return False
        if job.sent_at < long_before:
            return True
        queues = [job.sent_queue] if job.sent_queue else list(passed)
        return any(q in passed and job.sent_at + margin < passed[q] for q in queues)

    lost = [job for job in overdue if moved_past(job)]
    if len(lost) == len(overdue):
        return lost
    lost_ids = {job.id for job in lost}
    # Ask about the queues these jobs were sent to, whatever their names; a job sent before
    # the queue was noted may be on either of the two first ones.
    unknown = (QUEUE, GPU_QUEUE)
    waiting = waiting_in_broker(
        {q for job in overdue for q in ([job.sent_queue] if job.sent_queue else unknown)}
    )
    if waiting is None:
        return lost
    return [
        job
        for job in overdue
        if job.id in lost_ids
        or all(waiting[q] == 0 for q in ([job.sent_queue] if job.sent_queue else unknown))
    ]


def _move(
    session: Session,
    job: GradingJob,
    old: JobState,
    new: JobState,
    *,
    stale_before: datetime | None = None,
) -> bool:
    """Change a job's state only if nobody else changed it first (several workers sweep).

    With `stale_before`, only while its heartbeat is still that old: a slow worker whose beat
    landed after the sweep looked keeps its job.
    """
    query = update(GradingJob).where(GradingJob.id == job.id, GradingJob.state == old.value)
    if stale_before is not None:
        query = query.where(GradingJob.heartbeat_at < stale_before)
    result = session.execute(
        query.values(state=new.value, sent_at=None).execution_options(synchronize_session="fetch")
    )
    return result.rowcount == 1  # type: ignore[attr-defined]


class SweeperThread(threading.Thread):
    """Calls sweep() every sweep_seconds until stopped."""

    def __init__(self, *, has_gpu: bool) -> None:
        super().__init__(name="kernelgrader-sweeper", daemon=True)
        self.has_gpu = has_gpu
        self.stopped = threading.Event()

    def run(self) -> None:
        every = get_settings().sweep_seconds
        while not self.stopped.wait(every):
            try:
                report = sweep(has_gpu=self.has_gpu)
                if (
                    report.resent
                    or report.lost
                    or report.requeued
                    or report.failed
                    or report.to_gpu
                ):
                    log.info("sweep: %s", report)
            except Exception:
                log.exception("sweep failed; trying again in %s s", every)
