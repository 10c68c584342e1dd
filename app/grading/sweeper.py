"""Finds jobs the queue lost and sends them again; run periodically by every worker."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from app.core.database import session_scope, utcnow
from app.core.settings import get_settings
from app.grading.bulk import background_jobs_to_send
from app.grading.celery_app import QUEUE
from app.grading.models import GradingJob, JobState, Priority
from app.grading.queue import send_job
from app.grading.routing import gpu_queue, served_keys
from app.grading.worker import NOT_YOUR_FAULT
from app.submissions.models import Status, Submission
from app.submissions.service import set_status

log = logging.getLogger(__name__)


@dataclass
class SweepReport:
    resent: list[int] = field(default_factory=list)  # job ids never sent, sent now
    requeued: list[int] = field(default_factory=list)  # lost jobs sent again
    failed: list[int] = field(default_factory=list)  # lost jobs out of attempts
    to_gpu: list[int] = field(default_factory=list)  # compiled jobs handed to a GPU worker
    background: list[int] = field(default_factory=list)  # a lab regrade's jobs, a few at a time


def sweep(
    *, now: datetime | None = None, has_gpu: bool = False, gpu_model: str = ""
) -> SweepReport:
    """One pass; a worker with a GPU (named `gpu_model`) also takes the compiled jobs it can run."""
    settings = get_settings()
    now = now or utcnow()
    report = SweepReport()
    unsent_before = now - timedelta(seconds=settings.resend_after_seconds)
    lost_send_before = now - timedelta(seconds=settings.resend_sent_after_seconds)
    stale_before = now - timedelta(seconds=settings.heartbeat_timeout_seconds)
    sends: list[tuple[int, int, str]] = []
    with session_scope() as session:
        # Committed but never sent (the send after the commit failed or the process died), or
        # sent long ago and never taken (the broker lost it).
        for job in session.scalars(
            select(GradingJob).where(
                GradingJob.state == JobState.queued.value,
                or_(
                    # A lab regrade's jobs are held back on purpose; they go out below.
                    GradingJob.sent_at.is_(None)
                    & (GradingJob.queued_at < unsent_before)
                    & (GradingJob.priority == Priority.normal.value),
                    GradingJob.sent_at < lost_send_before,
                ),
            )
        ).all():
            sends.append((job.submission_id, job.id, QUEUE))
            report.resent.append(job.id)
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
                sends.append((job.submission_id, job.id, QUEUE))
                report.requeued.append(job.id)
        if has_gpu:
            # Only jobs whose lab names no GPU model or one this GPU serves, each onto the
            # queue of the model it needs, so that only workers of that model take it.
            for job in session.scalars(
                select(GradingJob).where(
                    GradingJob.state == JobState.waiting_gpu.value,
                    GradingJob.gpu_model.in_(served_keys(gpu_model)),
                )
            ).all():
                if _move(session, job, JobState.waiting_gpu, JobState.queued):
                    job.queued_at = now
                    sends.append((job.submission_id, job.id, gpu_queue(job.gpu_model)))
                    report.to_gpu.append(job.id)
        for submission_id, job_id in background_jobs_to_send(session, now=now):
            sends.append((submission_id, job_id, QUEUE))
            report.background.append(job_id)
    # Send only once the state changes are committed, so a fast worker finds them.
    for submission_id, job_id, queue in sends:
        send_job(submission_id=submission_id, job_id=job_id, queue=queue)
    return report


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

    def __init__(self, *, has_gpu: bool, gpu_model: str = "") -> None:
        super().__init__(name="kernelgrader-sweeper", daemon=True)
        self.has_gpu = has_gpu
        self.gpu_model = gpu_model
        self.stopped = threading.Event()

    def run(self) -> None:
        every = get_settings().sweep_seconds
        while not self.stopped.wait(every):
            try:
                report = sweep(has_gpu=self.has_gpu, gpu_model=self.gpu_model)
                if (
                    report.resent
                    or report.requeued
                    or report.failed
                    or report.to_gpu
                    or report.background
                ):
                    log.info("sweep: %s", report)
            except Exception:
                log.exception("sweep failed; trying again in %s s", every)
