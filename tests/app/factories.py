"""Rows for tests that need submissions in a given state without grading them."""

from __future__ import annotations

from datetime import datetime, timedelta

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import Lab
from app.submissions.models import GradingJob, JobState, Status, Submission
from app.submissions.service import set_status
from app.users.models import User
from tests.app.conftest import GOOD_KERNEL, World


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


def make_timed_submission(
    session: Session,
    *,
    user: User,
    lab: Lab,
    median_ms: float,
    gpu: str = "NVIDIA H100 80GB HBM3",
    passed: bool = True,
    created_at: datetime | None = None,
    references: dict[str, float] | None = None,
) -> Submission:
    """A submission graded on a GPU (the scale-test lab's two cases), its first case timed."""
    from app.grading.record import record_report
    from graders.results import CaseResult as GradedCase
    from graders.results import GpuInfo, GradeReport, TimingStats

    def stats(ms: float) -> TimingStats:
        return TimingStats(median_ms=ms, min_ms=ms, mean_ms=ms, stdev_ms=0.0, reps=20, rse=0.0)

    submission, job = make_submission(
        session,
        user=user,
        lab=lab,
        status=Status.running,
        job_state=JobState.started,
        created_at=created_at,
    )
    refs = references if references is not None else {"naive": median_ms * 3, "fast": median_ms / 2}
    cases = [
        GradedCase(
            name="n-1000",
            sizes={"n": 1000},
            hidden=False,
            passed=passed,
            verdict="pass" if passed else "wrong_answer",
            message="" if passed else "dst[3]: expected 1, got 0.",
            points=6 if passed else 0,
            max_points=6,
            timing=stats(median_ms),
            reference_timings={name: stats(ms) for name, ms in refs.items()},
        ),
        GradedCase(
            name="n-1048579",
            sizes={"n": 1048579},
            hidden=True,
            passed=True,
            verdict="pass",
            message="",
            points=4,
            max_points=4,
        ),
    ]
    report = GradeReport(
        lab=lab.slug,
        cases=cases,
        score=10 if passed else 4,
        max_score=10,
        summary="All 2 cases passed." if passed else "1 of 2 cases passed.",
        gpu=GpuInfo(name=gpu, arch="sm_90"),
    )
    record_report(session, submission=submission, job=job, report=report)
    session.flush()
    return submission


async def upload(client: httpx.AsyncClient, world: World, session: Session) -> tuple[int, int]:
    """The student uploads the good kernel: its submission's id and its job's, not yet graded."""
    r = await client.post(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/submissions",
        headers=world.student.auth,
        files={"file": ("scale.cu", GOOD_KERNEL.encode(), "text/plain")},
    )
    assert r.status_code == 202, r.text
    sid = int(r.json()["id"])
    job_id = session.scalars(select(GradingJob.id).where(GradingJob.submission_id == sid)).one()
    return sid, job_id
