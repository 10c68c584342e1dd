"""Lost and unsent jobs are found and sent again; out of attempts, the student is told why."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.settings import get_settings
from app.grading.models import GradingJob, JobState
from app.grading.sweeper import sweep
from app.grading.worker import NOT_YOUR_FAULT
from app.submissions.models import Status, Submission, SubmissionEvent
from tests.app.conftest import make_world
from tests.app.factories import make_submission


def _lost_job(session: Session, *, attempt: int) -> tuple[int, int]:
    world = make_world(session)
    long_ago = utcnow() - timedelta(hours=1)
    submission, job = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.compiling,
        job_state=JobState.started,
        created_at=long_ago,
    )
    job.attempt = attempt
    job.worker_id = "gone-host:123"
    job.started_at = job.heartbeat_at = long_ago
    job.sent_at = long_ago
    session.commit()
    return submission.id, job.id


def test_a_job_whose_worker_stopped_beating_is_queued_and_sent_again(session: Session) -> None:
    submission_id, job_id = _lost_job(session, attempt=1)
    report = sweep()
    assert job_id in report.requeued
    session.expire_all()
    job = session.get_one(GradingJob, job_id)
    assert job.state == JobState.queued.value
    assert job.worker_id is None
    assert job.sent_at is not None  # sent to the broker again
    submission = session.get_one(Submission, submission_id)
    assert submission.status == Status.queued.value
    assert "stopped responding" in submission.status_message
    assert "attempt 2 of 3" in submission.status_message
    # A second sweep finds nothing more to do with it.
    assert job_id not in sweep().requeued


def test_a_job_lost_too_often_is_an_error_that_is_not_the_students_fault(
    session: Session,
) -> None:
    submission_id, job_id = _lost_job(session, attempt=get_settings().max_attempts)
    report = sweep()
    assert job_id in report.failed
    session.expire_all()
    assert session.get_one(GradingJob, job_id).state == JobState.failed.value
    submission = session.get_one(Submission, submission_id)
    assert submission.status == Status.error.value
    assert submission.status_message == NOT_YOUR_FAULT
    history = session.scalars(
        select(SubmissionEvent.status)
        .where(SubmissionEvent.submission_id == submission_id)
        .order_by(SubmissionEvent.id)
    ).all()
    assert history == ["compiling", "error"]


def test_a_job_with_a_fresh_heartbeat_is_left_alone(session: Session) -> None:
    submission_id, job_id = _lost_job(session, attempt=1)
    job = session.get_one(GradingJob, job_id)
    job.heartbeat_at = utcnow()
    session.commit()
    report = sweep()
    assert job_id not in report.requeued and job_id not in report.failed
    session.expire_all()
    assert session.get_one(GradingJob, job_id).state == JobState.started.value


def test_a_committed_job_that_was_never_sent_is_sent(session: Session) -> None:
    world = make_world(session)
    _, job = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.queued,
        job_state=JobState.queued,
        created_at=utcnow() - timedelta(minutes=5),
    )
    session.commit()
    assert job.sent_at is None
    report = sweep()
    assert job.id in report.resent
    session.expire_all()
    assert session.get_one(GradingJob, job.id).sent_at is not None
    assert job.id not in sweep().resent


def test_compiled_jobs_go_to_a_gpu_worker_only_when_one_sweeps(session: Session) -> None:
    world = make_world(session)
    _, job = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.compiled,
        job_state=JobState.waiting_gpu,
    )
    session.commit()
    assert job.id not in sweep(has_gpu=False).to_gpu
    assert job.id in sweep(has_gpu=True).to_gpu
    session.expire_all()
    assert session.get_one(GradingJob, job.id).state == JobState.queued.value


def test_a_job_sent_long_ago_and_never_taken_is_sent_once_more(session: Session) -> None:
    world = make_world(session)
    long_ago = utcnow() - timedelta(hours=2)
    _, job = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.queued,
        job_state=JobState.queued,
        created_at=long_ago,
    )
    job.sent_at = long_ago
    session.commit()
    assert job.id in sweep().resent
    session.expire_all()
    assert session.get_one(GradingJob, job.id).sent_at > long_ago
    assert job.id not in sweep().resent


def test_a_beat_that_lands_after_the_sweep_looked_keeps_the_job_with_its_worker(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy import update

    from app.grading import sweeper

    submission_id, job_id = _lost_job(session, attempt=1)
    real_move = sweeper._move

    def worker_beats_first(s: Session, job: GradingJob, *args: Any, **kwargs: Any) -> bool:
        # The worker was only slow: its beat lands between the sweep's look and its move.
        if job.id == job_id:
            s.execute(
                update(GradingJob).where(GradingJob.id == job_id).values(heartbeat_at=utcnow())
            )
        return real_move(s, job, *args, **kwargs)

    monkeypatch.setattr(sweeper, "_move", worker_beats_first)
    report = sweep()
    assert job_id not in report.requeued
    session.expire_all()
    job = session.get_one(GradingJob, job_id)
    assert job.state == JobState.started.value and job.worker_id == "gone-host:123"
    assert session.get_one(Submission, submission_id).status == Status.compiling.value


def test_a_gpu_worker_sweeps_only_the_compiled_jobs_its_gpu_model_serves(
    session: Session,
) -> None:
    world = make_world(session)
    jobs = {}
    for key in ("h100", "h100-pcie", "h200", ""):
        _, job = make_submission(
            session,
            user=world.student.user,
            lab=world.lab,
            status=Status.compiled,
            job_state=JobState.waiting_gpu,
        )
        job.gpu_model = key
        jobs[key] = job.id
    session.commit()
    taken = sweep(has_gpu=True, gpu_model="NVIDIA H100 PCIe").to_gpu
    assert {jobs["h100"], jobs["h100-pcie"], jobs[""]} <= set(taken)
    assert jobs["h200"] not in taken
    session.expire_all()
    assert session.get_one(GradingJob, jobs["h200"]).state == JobState.waiting_gpu.value
    assert jobs["h200"] in sweep(has_gpu=True, gpu_model="NVIDIA H200").to_gpu
    # Onto the queue of the model it needs, which only workers with such a GPU listen on.
    assert jobs["h200"] in job_ids_on("grading.gpu.h200")


def job_ids_on(queue: str) -> list[int]:
    """Take every message off a broker queue; the job ids they name."""
    from app.grading.celery_app import celery_app

    found = []
    with celery_app.connection_for_read() as connection:
        simple = connection.SimpleQueue(queue)
        try:
            while True:
                message = simple.get(timeout=1)
                args = message.payload[0]
                message.ack()
                found.append(int(args[1]))
        except simple.Empty:
            pass
        finally:
            simple.close()
    return found
