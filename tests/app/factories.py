"""Rows for tests that need submissions in a given state without grading them."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import Lab
from app.grading.models import GradingJob, JobState
from app.submissions.models import Status, Submission
from app.submissions.service import set_status
from app.users.models import User
from tests.app.conftest import GOOD_KERNEL


def make_submission(
    session: Session,
    *,
    user: User,
    lab: Lab,
    status: Status = Status.graded,
    score: float | None = None,
    late: bool = False,
    created_at: datetime | None = None,
    job_state: JobState = JobState.done,
) -> tuple[Submission, GradingJob]:
    created_at = created_at or utcnow()
    submission = Submission(
        user_id=user.id,
        lab_id=lab.id,
        source_text=GOOD_KERNEL,
        sha256="0" * 64,
        filename="scale.cu",
        created_at=created_at,
        late=late,
        score=score,
        max_score=lab.max_score,
        graded_at=created_at if status in (Status.graded, Status.compile_error) else None,
    )
    session.add(submission)
    session.flush()
    set_status(session, submission, status)
    job = GradingJob(submission_id=submission.id, state=job_state.value, queued_at=created_at)
    session.add(job)
    session.flush()
    return submission, job


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)
