"""Finds jobs the queue lost and sends them again; run periodically by every worker.

Every send is stamped on the job first: `sent_at` (the stamp the message carries) and
`sent_queue`, the queue the job belongs on: the main queue for a job to compile, the queue of
its GPU model for a compiled job handed to a GPU worker. A job sent again, for whatever reason,
goes back to that queue; the stamps are conditional writes, so of several workers sweeping at
once only one sends a given job. Jobs never sent and jobs the broker lost go out together, in
upload order, a few stamped at a time (`_send_again`); the others are stamped in the sweep's
transaction.

A lab regrade's jobs (background priority) are sent by one step only, the last, a few at a
time and only while no student's job waits (app.grading.bulk): wherever a job of theirs would
be sent (lost by the broker, its worker gone, compiled and waiting for a GPU), it goes back
among the held-back ones instead, still knowing its queue.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from app.core.database import session_scope, utcnow
from app.core.overload import database_unavailable
from app.core.settings import get_settings
from app.grading import programs
from app.grading.bulk import background_jobs_to_send
from app.grading.flows import after_grading
from app.grading.worker import NOT_YOUR_FAULT, held_here
from app.jobs.celery_app import GPU_QUEUE, QUEUE
from app.jobs.routing import gpu_queue, served_keys
from app.jobs.send import STAMP_MARGIN, Send, send_in_order, waiting_in_broker
from app.jobs.workers import worker_id
from app.policy.recount import sweep_recounts
from app.profiling.sweep import profiles_to_send
from app.similarity.sweep import reports_to_send
from app.submissions.models import GRADING, GradingJob, JobState, Priority, Status, Submission
from app.submissions.service import grading_message, set_status

log = logging.getLogger(__name__)

# Jobs sent again are stamped and sent this many at a time (a few hundredths of a second).
RESEND_CHUNK = 50


@dataclass
class SweepReport:
    resent: list[int] = field(default_factory=list)  # job ids never sent, sent now
    lost: list[int] = field(default_factory=list)  # sent but never started: sent again
    requeued: list[int] = field(default_factory=list)  # lost jobs sent again
    failed: list[int] = field(default_factory=list)  # lost jobs out of attempts
    to_gpu: list[int] = field(default_factory=list)  # compiled jobs handed to a GPU worker
    background: list[int] = field(default_factory=list)  # a lab regrade's jobs, a few at a time
    profiles: list[int] = field(default_factory=list)  # profiling jobs, when no grading waits
    similarity: list[int] = field(default_factory=list)  # similarity reports (re)sent
    recounts: list[int] = field(default_factory=list)  # courses whose late days were recounted

    def __bool__(self) -> bool:
        return bool(
            self.resent
            or self.lost
            or self.requeued
            or self.failed
            or self.to_gpu
            or self.background
            or self.profiles
            or self.similarity
            or self.recounts
        )


def home_queue(job: GradingJob) -> str:
    """The queue a queued job belongs on: the one its last send was meant for."""
    return job.sent_queue or QUEUE


def sweep(
    *, now: datetime | None = None, has_gpu: bool = False, gpu_model: str = "", me: str = ""
) -> SweepReport:
    """One pass; a worker with a GPU (named `gpu_model`) also takes the compiled jobs it can run.

    `me`: the sweeping worker (worker_id()), whose jobs still running in this process are
    never taken back, however late their heartbeat.
    """
    settings = get_settings()
    now = now or utcnow()
    me = me or worker_id()
    report = SweepReport()
    unsent_before = now - timedelta(seconds=settings.resend_after_seconds)
    overdue_before = now - timedelta(seconds=settings.resend_unstarted_after_seconds)
    long_before = now - timedelta(seconds=settings.resend_sent_after_seconds)
    stale_before = now - timedelta(seconds=settings.heartbeat_timeout_seconds)
    sends: list[Send] = []
    again: list[_Again] = []  # jobs to send again, once this transaction commits
    with session_scope() as session:
        # Committed but not sent: the send after the commit failed and took its stamp back.
        # (A web process that died between its commit and its send left a stamp: such a job
        # is found as lost, below.) A lab regrade's jobs are held back on purpose; they go
        # out at the end, a few at a time.
        for job in session.scalars(
            select(GradingJob).where(
                GradingJob.state == JobState.queued.value,
                GradingJob.sent_at.is_(None),
                GradingJob.queued_at < unsent_before,
                GradingJob.priority == Priority.normal.value,
            )
        ).all():
            again.append(_Again.of(job, lost=False))
        # Sent, and still not started a while later: lost by the broker (restarted without
        # persistence), or taken by a worker that died before claiming it. Judged by the
        # jobs' own rows, not by what the broker says it holds.
        for job in lost_jobs(
            session, overdue_before=overdue_before, long_before=long_before, margin=STAMP_MARGIN
        ):
            if job.priority != Priority.normal.value:
                if _hold_back(session, job):
                    report.lost.append(job.id)  # the last step sends it again in its turn
                continue
            again.append(_Again.of(job, lost=True))
        # Held by a worker that stopped beating: send again, or give up after max_attempts.
        for job in session.scalars(
            select(GradingJob).where(
                GradingJob.state == JobState.started.value, GradingJob.heartbeat_at < stale_before
            )
        ).all():
            if job.worker_id == me and held_here(job.id):
                # One of this process's own threads still runs it: its beat is late (the
                # database was away, say), not lost. Taking it back would grade it twice.
                continue
            submission = session.get_one(Submission, job.submission_id)
            if job.attempt >= settings.max_attempts:
                moved = _move(
                    session, job, JobState.started, JobState.failed, stale_before=stale_before
                )
                if moved:
                    programs.forget(session, job_id=job.id)
                    job.finished_at = now
                    job.error = f"worker {job.worker_id} stopped after {job.attempt} attempts"
                    set_status(
                        session, submission, Status.error, NOT_YOUR_FAULT, staff_note=job.error
                    )
                    after_grading(session, submission=submission, job=job, verdict=False)
                    report.failed.append(job.id)
                continue
            # Back to the queue its worker took it from: a compiled job on its GPU model's
            # queue stays with the workers that can run it.
            queue = job.taken_queue or home_queue(job)
            background = job.priority != Priority.normal.value
            stamp = utcnow()
            moved = _move(
                session,
                job,
                JobState.started,
                JobState.queued,
                stale_before=stale_before,
                queued_at=now,
                worker_id=None,
                sent_at=None if background else stamp,
                sent_queue=queue,
            )
            if moved:
                # The next attempt compiles afresh: a kept program is run once, not after a fault.
                programs.forget(session, job_id=job.id)
                set_status(
                    session,
                    submission,
                    Status.queued,
                    f"The worker grading it stopped responding, so it was queued again "
                    f"(attempt {job.attempt + 1} of {settings.max_attempts}).",
                    staff_note=f"Worker {job.worker_id} stopped beating its heartbeat.",
                )
                if not background:
                    sends.append(
                        grading_message(
                            submission_id=job.submission_id,
                            job_id=job.id,
                            queue=queue,
                            stamped_at=stamp,
                        )
                    )
                report.requeued.append(job.id)
        programs.forget_finished(session)
        if has_gpu:
            # Only jobs whose lab names no GPU model or one this GPU serves, each onto the
            # queue of the model it needs, so that only workers of that model take it.
            for job in session.scalars(
                select(GradingJob).where(
                    GradingJob.state == JobState.waiting_gpu.value,
                    GradingJob.gpu_model.in_(served_keys(gpu_model)),
                )
            ).all():
                queue = gpu_queue(job.gpu_model)
                # A lab regrade's compiled job waits its turn like the rest of its regrade:
                # all of them at once on a GPU queue would hold up students' uploads there.
                background = job.priority != Priority.normal.value
                stamp = utcnow()
                moved = _move(
                    session,
                    job,
                    JobState.waiting_gpu,
                    JobState.queued,
                    queued_at=now,
                    sent_at=None if background else stamp,
                    sent_queue=queue,
                )
                if moved:
                    if not background:
                        sends.append(
                            grading_message(
                                submission_id=job.submission_id,
                                job_id=job.id,
                                queue=queue,
                                stamped_at=stamp,
                            )
                        )
                    report.to_gpu.append(job.id)
        for submission_id, job_id, queue, stamp in background_jobs_to_send(session, now=now):
            sends.append(
                grading_message(
                    submission_id=submission_id, job_id=job_id, queue=queue, stamped_at=stamp
                )
            )
            report.background.append(job_id)
        # Profiling jobs last, and only while no grading waits (app.profiling.sweep).
        profile_sends = profiles_to_send(session, now=now)
        report.profiles = [item.job_id for item in profile_sends]
        report_sends = reports_to_send(session, now=now)
        report.similarity = [item.job_id for item in report_sends]
    # Send only once the state changes are committed, so a fast worker finds them.
    send_in_order(sends)
    _send_again(again, report)
    send_in_order(profile_sends)
    send_in_order(report_sends)
    # A late-day recount its request left half-way (app.policy.recount), batch by batch.
    report.recounts = sweep_recounts(now=now)
    return report


@dataclass(frozen=True)
class _Again:
    """A queued job to send again, as the sweep read it: its stamp then (None: never sent)."""

    job_id: int
    submission_id: int
    queue: str
    stamp: datetime | None
    lost: bool  # sent, and lost; else never sent

    @classmethod
    def of(cls, job: GradingJob, *, lost: bool) -> _Again:
        return cls(job.id, job.submission_id, home_queue(job), job.sent_at, lost=lost)


def _send_again(again: list[_Again], report: SweepReport) -> None:
    """Send jobs never sent and jobs the broker lost, together in upload order.

    Stamped and sent a few at a time, so each message carries a stamp taken just before it
    is sent (see queue.STAMP_MARGIN), however many wait. A stamp is a conditional write: of
    several workers sweeping at once, only one sends a given job. Where the broker refuses
    one, the rest wait for the next sweep.
    """
    # Upload order: a submission's id is given as it is stored.
    again.sort(key=lambda item: (item.submission_id, item.job_id))
    for start in range(0, len(again), RESEND_CHUNK):
        chunk = again[start : start + RESEND_CHUNK]
        stamped: list[Send] = []
        with session_scope() as session:
            for item in chunk:
                stamp = utcnow()
                if _stamp_if_unchanged(session, item.job_id, item.stamp, item.queue, stamp):
                    stamped.append(
                        grading_message(
                            submission_id=item.submission_id,
                            job_id=item.job_id,
                            queue=item.queue,
                            stamped_at=stamp,
                        )
                    )
                    (report.lost if item.lost else report.resent).append(item.job_id)
        if len(send_in_order(stamped)) < len(stamped):
            return


def _hold_back(session: Session, job: GradingJob) -> bool:
    """Take a lab regrade's job off the broker's books: its stamp goes, its queue stays, and
    the sweep's last step sends it again in its turn. Conditional, as every stamp."""
    return _stamp_unless_changed(session, job, home_queue(job), None)


def _stamp_unless_changed(
    session: Session, job: GradingJob, queue: str, stamp: datetime | None
) -> bool:
    if not _stamp_if_unchanged(session, job.id, job.sent_at, queue, stamp):
        return False
    set_committed_value(job, "sent_at", stamp)
    set_committed_value(job, "sent_queue", queue)
    return True


def _stamp_if_unchanged(
    session: Session, job_id: int, old: datetime | None, queue: str, stamp: datetime | None
) -> bool:
    """Stamp a queued job (None: not sent) if its stamp is still `old`."""
    return GRADING.stamp(session, job_id, old=old, new=stamp, queue=queue)


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
    jobs sent between its copies. The margin (queue.STAMP_MARGIN) covers stamps taken a
    little before the send (at the commit), which may reach the broker out of their order; it
    is short, so that jobs a broker restart lost are found as soon as the workers take the
    uploads sent just after it, not once the backlog behind them has drained.

    A lab regrade's job is judged the same way once it was sent; one still held back (no
    stamp) is not overdue. Queues are per GPU model, and each is judged on its own.
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
    **values: Any,
) -> bool:
    """Change a job's state (and `values`) only if nobody else changed it first (several
    workers sweep); without a `sent_at` among `values`, the job counts as not sent.

    With `stale_before`, only while its heartbeat is still that old: a slow worker whose beat
    landed after the sweep looked keeps its job.
    """
    query = update(GradingJob).where(GradingJob.id == job.id, GradingJob.state == old.value)
    if stale_before is not None:
        query = query.where(GradingJob.heartbeat_at < stale_before)
    values.setdefault("sent_at", None)
    result = session.execute(
        query.values(state=new.value, **values).execution_options(synchronize_session="fetch")
    )
    return result.rowcount == 1  # type: ignore[attr-defined]


class SweeperThread(threading.Thread):
    """Calls sweep() every sweep_seconds until stopped."""

    def __init__(self, *, has_gpu: bool, gpu_model: str = "") -> None:
        super().__init__(name="kernelgrader-sweeper", daemon=True)
        self.has_gpu = has_gpu
        self.gpu_model = gpu_model
        self.stopped = threading.Event()

    def run(self) -> None:
        every = get_settings().sweep_seconds
        while not self.stopped.wait(every):
            self.sweep_once(every)

    def sweep_once(self, every: float) -> None:
        try:
            report = sweep(has_gpu=self.has_gpu, gpu_model=self.gpu_model)
            if report:
                log.info("sweep: %s", report)
        except Exception as exc:
            if database_unavailable(exc):
                # Away for now (a locked SQLite, a PostgreSQL restarting): a line, not a bug's
                # traceback; the next sweep does what this one could not.
                log.warning("sweep: the database is away (%s); trying again in %s s", exc, every)
            else:
                log.exception("sweep failed; trying again in %s s", every)
