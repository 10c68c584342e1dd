"""The sweep's part for profiling jobs: send the next one when no grading waits, and take
back the ones whose worker went silent.

Run by every worker's sweep (app.grading.sweeper). A profiling job is sent only while no
grading job is queued (a student's upload, a regrade) and fewer than `profile_in_flight`
are out, and only where a live worker can run it on its GPU model: a profile holds the
GPU's lock shared for seconds, so it never goes ahead of a grading, and one that is
running when a timed section comes lets go of the GPU and is queued again (app.profiling.jobs).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.core.settings import get_settings
from app.jobs.celery_app import PROFILE_TASK
from app.jobs.routing import gpu_queue, serves
from app.jobs.send import Send
from app.jobs.workers import live_workers
from app.profiling.jobs import FAILED_ON_OUR_SIDE
from app.profiling.models import PROFILES, KernelProfile, ProfileState
from app.submissions.models import GradingJob, JobState


def _take_back_stale(session: Session, *, now: datetime) -> int:
    """Started profiles whose heartbeat went stale: queued again (held back), or failed
    once their attempts are spent."""
    settings = get_settings()
    taken = PROFILES.take_back_stale(
        session,
        stale_before=now - timedelta(seconds=settings.heartbeat_timeout_seconds),
        max_attempts=settings.max_attempts,
        failed=lambda _: {
            "finished_at": now,
            "message": FAILED_ON_OUR_SIDE,
            "error": "its worker stopped responding on every attempt",
        },
        queued={"queued_at": now},
    )
    return len(taken)


def profiles_to_send(session: Session, *, now: datetime) -> list[Send]:
    """Stamp the next profiling jobs as sent; their messages, for the caller to send once this
    commits."""
    settings = get_settings()
    _take_back_stale(session, now=now)
    # Sent long ago and never started (the broker lost it): sent again in its turn.
    session.execute(
        update(KernelProfile)
        .where(
            KernelProfile.state == ProfileState.queued.value,
            KernelProfile.sent_at < now - timedelta(seconds=settings.resend_sent_after_seconds),
        )
        .values(sent_at=None)
        .execution_options(synchronize_session=False)
    )
    grading_waits = session.scalar(
        select(func.count())
        .select_from(GradingJob)
        .where(GradingJob.state == JobState.queued.value)
    )
    if grading_waits:
        return []
    out_now = session.scalar(
        select(func.count())
        .select_from(KernelProfile)
        .where(
            (KernelProfile.state == ProfileState.started.value)
            | (
                (KernelProfile.state == ProfileState.queued.value)
                & KernelProfile.sent_at.is_not(None)
            )
        )
    )
    room = settings.profile_in_flight - int(out_now or 0)
    if room <= 0:
        return []
    runners = [w.gpu_model for w in live_workers(session, now=now) if w.can_run]
    waiting = session.scalars(
        select(KernelProfile)
        .where(KernelProfile.state == ProfileState.queued.value, KernelProfile.sent_at.is_(None))
        # Staff's requests first, then in the order they were queued.
        .order_by(KernelProfile.requested_by_id.is_(None), KernelProfile.id)
        .limit(50)
    ).all()
    picked: list[Send] = []
    for profile in waiting:
        if len(picked) >= room:
            break
        if not any(serves(model, profile.gpu_model) for model in runners):
            continue  # no live GPU worker of its model: it waits, unsent
        queue = gpu_queue(profile.gpu_model)
        if PROFILES.stamp(session, profile.id, old=None, new=now, queue=queue):
            picked.append(profile_message(profile.id, queue=queue, stamped_at=now))
    return picked


def profile_message(profile_id: int, *, queue: str, stamped_at: datetime) -> Send:
    """A stamped profiling job's message, for its GPU model's queue."""
    return Send(
        task=PROFILE_TASK,
        args=(profile_id,),
        kwargs={"sent_at": stamped_at.isoformat(), "queue": queue},
        queue=queue,
        stamped_at=stamped_at,
        lease=PROFILES,
        job_id=profile_id,
    )
