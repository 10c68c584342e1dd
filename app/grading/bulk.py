"""Regrading a whole lab without holding up students' new uploads.

The jobs are written at once (the database holds the truth) with background priority and not
sent; every worker's sweep then sends a few at a time, only while no student's job is waiting
on the broker. Brokers differ in what they offer (the SQLite transport has no priorities, Redis
emulates a few), so the order is kept here, the same on both: a new upload waits behind at
most `BACKGROUND_IN_FLIGHT` regrade jobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, defer

from app.core.database import utcnow
from app.courses.models import Lab
from app.courses.specs import spec_for
from app.jobs.celery_app import QUEUE
from app.policy.counting import Scored, counted_submission
from app.submissions.models import GRADING, GradingJob, JobState, Priority, Status, Submission
from app.submissions.service import set_status

# Regrade jobs on the broker (sent, not yet taken) at any time.
BACKGROUND_IN_FLIGHT = 2

REGRADE_ALL_MESSAGE = (
    "Queued for a regrade of the whole lab by {who}; it runs when no new submission is "
    "waiting, so it may take a while. The earlier result counts until then."
)


@dataclass(frozen=True)
class BulkRegrade:
    queued: int
    skipped: int  # already waiting or being graded
    # Of the queued: last graded against another version of the lab (its content digest), and
    # last graded before versions were recorded.
    older: int = 0
    unrecorded: int = 0
    digest: str = ""  # the lab's version they are graded against now

    def versions(self) -> str:
        """A sentence on the lab versions they were last graded against ("" when all current)."""
        parts = []
        if self.older:
            was = "was" if self.older == 1 else "were"
            parts.append(f"{self.older} {was} last graded against an older version of the lab")
        if self.unrecorded:
            parts.append(f"{self.unrecorded} before lab versions were recorded")
        if not parts:
            return ""
        return f"Of these, {' and '.join(parts)}; the lab is now at version {self.digest[:12]}."


def _last_digests(session: Session, submission_ids: list[int]) -> dict[int, str]:
    """Each submission's latest finished grading job's lab digest ("" where not recorded)."""
    rows = session.execute(
        select(GradingJob.submission_id, GradingJob.lab_digest)
        .where(
            GradingJob.submission_id.in_(submission_ids),
            GradingJob.state.in_([JobState.done.value, JobState.failed.value]),
        )
        .order_by(GradingJob.id)
    ).all()
    return {sub_id: digest for sub_id, digest in rows}  # the last row of each wins


def regrade_lab(
    session: Session, *, lab: Lab, requested_by: str, now: datetime, counted_only: bool = False
) -> BulkRegrade:
    """Queue a background job for every submission of the lab (or only each student's
    counted one), skipping those already waiting or being graded. The caller commits; the
    sweep sends them."""
    submissions = list(
        session.scalars(
            select(Submission)
            .where(Submission.lab_id == lab.id)
            .options(defer(Submission.source_text))
        )
    )
    if counted_only:
        by_user: dict[int, list[Submission]] = {}
        for sub in submissions:
            by_user.setdefault(sub.user_id, []).append(sub)
        ids = set()
        for subs in by_user.values():
            counted = counted_submission(lab, [Scored.of(s) for s in subs])
            if counted is not None:
                ids.add(counted.submission_id)
        submissions = [s for s in submissions if s.id in ids]
    busy = set(
        session.scalars(
            select(GradingJob.submission_id).where(
                GradingJob.submission_id.in_([s.id for s in submissions]),
                GradingJob.state.in_([JobState.queued.value, JobState.started.value]),
            )
        )
    )

    digest = spec_for(lab).digest
    last = _last_digests(session, [s.id for s in submissions if s.id not in busy])
    older = sum(1 for d in last.values() if d and d != digest)
    unrecorded = sum(1 for d in last.values() if not d)
    queued = 0
    for sub in sorted(submissions, key=lambda s: s.id):
        if sub.id in busy:
            continue
        # A compiled submission still waiting for a GPU gets the new job instead.
        session.execute(
            update(GradingJob)
            .where(
                GradingJob.submission_id == sub.id,
                GradingJob.state == JobState.waiting_gpu.value,
            )
            .values(state=JobState.failed.value, finished_at=now, error="replaced by a regrade")
        )
        session.add(
            GradingJob(submission_id=sub.id, queued_at=now, priority=Priority.background.value)
        )
        set_status(session, sub, Status.queued, REGRADE_ALL_MESSAGE.format(who=requested_by))
        queued += 1
    session.flush()
    return BulkRegrade(
        queued=queued, skipped=len(busy), older=older, unrecorded=unrecorded, digest=digest
    )


def background_jobs_to_send(
    session: Session, *, now: datetime
) -> list[tuple[int, int, str, datetime]]:
    """Stamp the next background jobs as sent, if no normal job waits on the broker; return
    (submission_id, job_id, queue, stamp) for the caller to send once this commits."""
    waiting_normal = session.scalar(
        select(func.count())
        .select_from(GradingJob)
        .where(
            GradingJob.state == JobState.queued.value,
            GradingJob.priority == Priority.normal.value,
        )
    )
    if waiting_normal:
        return []
    in_flight = session.scalar(
        select(func.count())
        .select_from(GradingJob)
        .where(
            GradingJob.state == JobState.queued.value,
            GradingJob.priority == Priority.background.value,
            GradingJob.sent_at.is_not(None),
        )
    )
    room = BACKGROUND_IN_FLIGHT - int(in_flight or 0)
    if room <= 0:
        return []
    jobs = session.scalars(
        select(GradingJob)
        .where(
            GradingJob.state == JobState.queued.value,
            GradingJob.priority == Priority.background.value,
            GradingJob.sent_at.is_(None),
        )
        .order_by(GradingJob.id)
        .limit(room)
    ).all()
    picked = []
    for job in jobs:
        # The queue it belongs on: the main one, or its GPU model's once it was compiled and
        # handed to a GPU worker (a send there that failed is made again here).
        queue = job.sent_queue or QUEUE
        stamp = utcnow()
        # Conditional, since every worker sweeps: only one of them sends a given job.
        if GRADING.stamp(session, job.id, old=None, new=stamp, queue=queue):
            picked.append((job.submission_id, job.id, queue, stamp))
    return picked
