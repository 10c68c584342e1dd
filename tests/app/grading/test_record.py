"""Recording a grade report: one result set per job, however often it is recorded."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.grading.record import record_progress, record_report
from app.submissions.models import CaseResult, GradingJob, JobState, Status, Submission
from graders.results import CaseResult as GradedCase
from graders.results import GradeReport, TimingStats
from tests.app.conftest import make_world
from tests.app.factories import make_submission


def _report(passed_second: bool) -> GradeReport:
    timing = TimingStats(median_ms=0.5, min_ms=0.4, mean_ms=0.5, stdev_ms=0.01, reps=10, rse=0.01)
    return GradeReport(
        lab="scale-test",
        cases=[
            GradedCase(
                name="n-1000",
                sizes={"n": 1000},
                hidden=False,
                passed=True,
                verdict="pass",
                message="All 1000 values match.",
                points=6,
                max_points=6,
                seed=2**64 - 1,  # seeds may use all 64 bits
                timing=timing,
            ),
            GradedCase(
                name="n-1048579",
                sizes={"n": 1048579},
                hidden=True,
                passed=passed_second,
                verdict="pass" if passed_second else "wrong_answer",
                message="" if passed_second else "dst[1048578]: expected 1.0, got 0.0.",
                points=4 if passed_second else 0,
                max_points=4,
                first_wrong_index=None if passed_second else [1048578],
            ),
        ],
        score=10 if passed_second else 6,
        max_score=10,
        summary="summary",
    )


def test_recording_the_same_job_twice_leaves_one_result_set(session: Session) -> None:
    world = make_world(session)
    submission, job = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.running,
        job_state=JobState.started,
    )
    session.commit()
    record_report(session, submission=submission, job=job, report=_report(False))
    session.commit()
    # The job is delivered again (a worker died before acknowledging it) and graded again.
    record_report(session, submission=submission, job=job, report=_report(True))
    session.commit()
    rows = session.scalars(
        select(CaseResult).where(CaseResult.job_id == job.id).order_by(CaseResult.position)
    ).all()
    assert [(r.name, r.passed) for r in rows] == [("n-1000", True), ("n-1048579", True)]
    assert rows[0].seed == str(2**64 - 1)
    assert rows[0].timing is not None and rows[0].timing["median_ms"] == 0.5
    session.expire_all()
    assert session.get_one(Submission, submission.id).score == 10
    assert session.get_one(GradingJob, job.id).state == JobState.done.value
    count = session.scalar(
        select(func.count()).select_from(CaseResult).where(CaseResult.job_id == job.id)
    )
    assert count == 2


def test_a_grader_failure_in_the_run_stage_leaves_the_earlier_verdict(session: Session) -> None:
    from app.core.database import utcnow
    from app.grading.record import NOT_YOUR_FAULT

    world = make_world(session)
    submission, job = make_submission(
        session, user=world.student.user, lab=world.lab, status=Status.running, score=8.0
    )
    graded_at = submission.graded_at = utcnow()
    job.state = JobState.started.value
    report = _report(passed_second=False)
    # The run child failed on our side after one case: what it has is not a verdict.
    report.error = "internal"
    report.summary = "The grader failed (not your fault): the child stopped."
    record_report(session, submission=submission, job=job, report=report)
    session.commit()
    session.expire_all()
    submission = session.get_one(Submission, submission.id)
    assert submission.status == Status.error.value
    assert submission.status_message == NOT_YOUR_FAULT
    assert submission.score == 8.0 and submission.graded_at == graded_at
    assert session.get_one(GradingJob, job.id).state == JobState.failed.value


def test_timings_and_performance_points_are_labelled_with_the_gpu_model(
    session: Session,
) -> None:
    from datetime import timedelta

    from app.core.database import utcnow
    from app.submissions.schemas import submission_read
    from graders.results import GpuInfo

    world = make_world(session)
    submission, job = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.running,
        job_state=JobState.started,
    )
    job.started_at = utcnow() - timedelta(seconds=3)
    job.compiled_at = utcnow() - timedelta(seconds=2)
    report = _report(passed_second=True)
    report.gpu = GpuInfo(name="NVIDIA H200", arch="sm_90", sm_clock_mhz=1980, temperature_c=41)
    record_report(session, submission=submission, job=job, report=report)
    session.commit()
    assert job.run_seconds is not None and job.run_seconds >= 2
    view = submission_read(session, submission=submission, viewer_is_staff=True)
    assert view.gpu_model == "NVIDIA H200"
    timed = [case.timings for case in view.cases if case.timings]
    assert timed and all(t["gpu_model"] == "NVIDIA H200" for t in timed)


def _progress(report: GradeReport) -> GradeReport:
    """The report as the engine hands it over before timing: verdicts, no timings yet."""
    for case in report.cases:
        case.timing = None
    return report


@pytest.mark.anyio
async def test_verdicts_are_shown_while_timing_and_the_sanitizer_still_run(
    session: Session, client: httpx.AsyncClient
) -> None:
    world = make_world(session)
    submission, job = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.running,
        job_state=JobState.started,
    )
    session.commit()
    record_progress(
        session, submission=submission, job=job, report=_progress(_report(False)), phase="timing"
    )
    session.commit()
    url = f"/api/v1/submissions/{submission.id}"
    during = (await client.get(url, headers=world.student.auth)).json()
    assert during["status"] == "timing"
    assert "1 of 2 cases passed so far" in during["status_message"]
    assert [c["passed"] for c in during["cases"]] == [True, False]
    assert during["score"] is None  # the score waits for timing
    record_progress(
        session, submission=submission, job=job, report=_report(False), phase="sanitizer"
    )
    session.commit()
    during = (await client.get(url, headers=world.student.auth)).json()
    assert during["status"] == "sanitizer" and len(during["cases"]) == 2
    report = _report(True)
    report.flags = ["The timed median, 0.01 ms, is 50x faster than the fastest reference."]
    record_report(session, submission=submission, job=job, report=report)
    session.commit()
    done = (await client.get(url, headers=world.student.auth)).json()
    assert done["status"] == "graded" and done["score"] == 10
    assert [h["status"] for h in done["history"]][-3:] == ["timing", "sanitizer", "graded"]
    # The flag is for staff: the student never sees it.
    assert done["review_flag"] is None
    staff = (await client.get(url, headers=world.ta.auth)).json()
    assert "50x faster" in staff["review_flag"]


@pytest.mark.anyio
async def test_the_api_says_where_and_when_the_references_were_timed(
    session: Session, client: httpx.AsyncClient
) -> None:
    world = make_world(session)
    submission, job = make_submission(
        session, user=world.student.user, lab=world.lab, status=Status.running,
        job_state=JobState.started,
    )  # fmt: skip
    session.commit()
    report = _report(True)
    kept = TimingStats(
        1.0, 0.9, 1.0, 0.01, 10, 0.01, measured_at="2026-11-20T10:00:00+00:00",
        gpu="NVIDIA H100 80GB HBM3", driver="580.159.04", reused=True,
    )  # fmt: skip
    report.cases[0].reference_timings = {"naive": kept}
    record_report(session, submission=submission, job=job, report=report)
    session.commit()
    body = (
        await client.get(f"/api/v1/submissions/{submission.id}", headers=world.student.auth)
    ).json()
    assert body["references_timed"] == [
        {
            "reference": "naive",
            "gpu": "NVIDIA H100 80GB HBM3",
            "driver": "580.159.04",
            "measured_at": "2026-11-20T10:00:00+00:00",
            "reused": True,
        }
    ]
    from tests.app.web.test_routes import login

    await login(client, world.student)
    page = await client.get(f"/submissions/{submission.id}")
    assert "References timed on NVIDIA H100 80GB HBM3" in page.text
    assert "kept from an earlier grading" in page.text
