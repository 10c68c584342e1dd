"""A grading whose timed section other work overlapped is timed again later, a bounded number of
times; its performance points are held back meanwhile."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.grading.worker import retime_later
from app.submissions.models import GradingJob, JobState, Priority
from tests.app.conftest import World
from tests.app.factories import make_submission


def _jobs(session: Session, submission_id: int) -> list[GradingJob]:
    return list(
        session.scalars(
            select(GradingJob)
            .where(GradingJob.submission_id == submission_id)
            .order_by(GradingJob.id)
        )
    )


def test_a_held_back_grading_queues_one_background_job(world: World, session: Session) -> None:
    submission, job = make_submission(session, user=world.student.user, lab=world.lab)
    job.report = {"performance_pending": True}
    assert retime_later(session, submission=submission, job=job, limit=3)
    session.flush()
    jobs = _jobs(session, submission.id)
    assert len(jobs) == 2
    assert jobs[1].state == JobState.queued.value and jobs[1].priority == Priority.background.value
    # While that job waits, a second held-back grading queues nothing more.
    assert not retime_later(session, submission=submission, job=job, limit=3)


def test_it_stops_after_the_limit(world: World, session: Session) -> None:
    submission, job = make_submission(session, user=world.student.user, lab=world.lab)
    job.report = {"performance_pending": True}
    for _ in range(2):  # two earlier attempts also held back
        session.add(
            GradingJob(
                submission_id=submission.id,
                state=JobState.done.value,
                report={"performance_pending": True},
            )
        )
    session.flush()
    assert not retime_later(session, submission=submission, job=job, limit=2)  # 3 > 2
    assert retime_later(session, submission=submission, job=job, limit=3)  # 3 <= 3
