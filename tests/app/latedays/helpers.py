"""Graded submissions recorded the way a worker records one (so late days are settled)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from app.courses.deadlines import deadline_for
from app.courses.models import Lab
from app.grading.record import record_report
from app.submissions.models import JobState, Status, Submission
from app.users.models import User
from graders.results import GradeReport
from tests.app.factories import make_submission


def graded(
    session: Session, *, user: User, lab: Lab, at: datetime, score: float = 10.0
) -> Submission:
    """A submission made at `at` (late by the author's due date in force), then graded."""
    late = deadline_for(session, lab=lab, user_id=user.id).is_late(at)
    submission, job = make_submission(
        session,
        user=user,
        lab=lab,
        status=Status.running,
        job_state=JobState.started,
        created_at=at,
        late=late,
    )
    report = GradeReport(lab=lab.slug, cases=[], score=score, max_score=10, summary="graded")
    record_report(session, submission=submission, job=job, report=report)
    session.flush()
    return submission


def record_graded(submission_id: int, *, score: float = 10.0) -> None:
    """A GPU worker's verdict on an uploaded submission (its latest job), recorded by the
    worker's own function in a transaction of its own, as a worker does."""
    from sqlalchemy import select

    from app.core.database import session_scope
    from app.submissions.models import GradingJob

    with session_scope() as session:
        submission = session.get_one(Submission, submission_id)
        job = session.scalars(
            select(GradingJob)
            .where(GradingJob.submission_id == submission_id)
            .order_by(GradingJob.id.desc())
            .limit(1)
        ).one()
        job.state = JobState.started.value
        submission.status = Status.running.value
        submission.compile_ok = True
        report = GradeReport(
            lab="", cases=[], score=score, max_score=10, summary=f"graded: {score:g} points"
        )
        record_report(session, submission=submission, job=job, report=report)
