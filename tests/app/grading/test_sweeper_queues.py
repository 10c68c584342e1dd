"""The sweeper where issue 9's send stamps meet the queues of the other branches: a lost job
goes back to the queue it belongs on (its GPU model's, for a compiled job), a lab regrade's
jobs go out only in their turn whatever sent them last, and a job a live thread of this
worker process runs is never taken back (workers run several jobs at once, in threads)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.settings import get_settings
from app.grading import worker
from app.grading.bulk import BACKGROUND_IN_FLIGHT
from app.grading.sweeper import sweep
from app.jobs.celery_app import GPU_QUEUE, GRADE_TASK, QUEUE, celery_app
from app.submissions.models import GradingJob, JobState, Priority, Status
from tests.app.conftest import World, make_world
from tests.app.factories import make_submission

H100 = "grading.gpu.h100"
H100_GPU = "NVIDIA H100 80GB HBM3"
QUEUES = (QUEUE, GPU_QUEUE, H100)


def job_ids_on(queue: str) -> list[int]:
    """Take every message off a broker queue; the grading jobs they name (an earlier test's
    similarity report or profile, sent on the same queue, is taken off and not counted)."""
    found = []
    with celery_app.connection_for_read() as connection:
        simple = connection.SimpleQueue(queue)
        try:
            while True:
                message = simple.get_nowait()
                message.ack()
                if message.headers.get("task") == GRADE_TASK:
                    found.append(int(message.payload[0][1]))
        except simple.Empty:
            pass
        finally:
            simple.close()
    return found


@pytest.fixture
def quiet(session: Session) -> Iterator[World]:
    """A world whose jobs are the only ones waiting or running: every sweep reads all jobs,
    and those earlier tests left queued, started or compiled (waiting for a GPU) would count
    as students' jobs waiting, or be sent to a queue these tests read."""
    session.execute(
        update(GradingJob)
        .where(~GradingJob.state.in_([JobState.done.value, JobState.failed.value]))
        .values(state=JobState.failed.value, error="parked by a test")
    )
    session.commit()
    for queue in QUEUES:
        job_ids_on(queue)
    yield make_world(session)
    for queue in QUEUES:
        job_ids_on(queue)


def _job(
    session: Session,
    world: World,
    *,
    state: JobState,
    sent_at: datetime | None = None,
    queue: str | None = None,
    background: bool = False,
) -> GradingJob:
    _, job = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.queued,
        job_state=state,
    )
    job.sent_at, job.sent_queue = sent_at, queue
    if background:
        job.priority = Priority.background.value
    session.commit()
    return job


def _fresh(session: Session, job: GradingJob) -> GradingJob:
    session.expire_all()
    return session.get_one(GradingJob, job.id)


def _overdue() -> timedelta:
    return timedelta(seconds=get_settings().resend_unstarted_after_seconds + 1)


def test_a_lost_job_of_a_gpu_models_queue_is_sent_again_to_that_queue(
    session: Session, quiet: World
) -> None:
    sent = utcnow()
    job = _job(session, quiet, state=JobState.queued, sent_at=sent, queue=H100)
    # The broker restarted without persistence: the model's queue holds nothing.
    report = sweep(now=sent + _overdue())
    assert job.id in report.lost
    assert job.id in job_ids_on(H100)
    assert job.id not in job_ids_on(QUEUE)  # not to the compile queue, for any worker
    again = _fresh(session, job)
    assert again.sent_queue == H100 and again.sent_at is not None and again.sent_at > sent


def test_a_compiled_job_whose_send_failed_is_sent_to_its_models_queue_later(
    session: Session, quiet: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = _job(session, quiet, state=JobState.waiting_gpu)
    _fresh(session, job).gpu_model = "h100"
    session.commit()

    def broker_away(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("the broker is restarting")

    with monkeypatch.context() as patch:
        patch.setattr(celery_app, "send_task", broker_away)
        moved = sweep(has_gpu=True, gpu_model=H100_GPU)
    assert job.id in moved.to_gpu
    failed = _fresh(session, job)
    # The send took its stamp back, and the job still knows where it belongs.
    assert (failed.state, failed.sent_at, failed.sent_queue) == (JobState.queued, None, H100)
    later = utcnow() + timedelta(seconds=get_settings().resend_after_seconds + 1)
    assert job.id in sweep(now=later).resent  # any worker's sweep, a compile-only one too
    assert job.id in job_ids_on(H100)
    assert job.id not in job_ids_on(QUEUE)


def test_a_job_whose_gpu_worker_died_goes_back_to_the_queue_it_was_taken_from(
    session: Session, quiet: World
) -> None:
    stale = utcnow() - timedelta(seconds=get_settings().heartbeat_timeout_seconds + 5)
    job = _job(session, quiet, state=JobState.started, sent_at=stale, queue=H100)
    held = _fresh(session, job)
    held.worker_id, held.heartbeat_at, held.attempt = "gone-host:1", stale, 1
    held.taken_sent_at, held.taken_queue = stale, H100
    session.commit()
    report = sweep(me="sweeping-host:2")
    assert job.id in report.requeued
    again = _fresh(session, job)
    assert (again.state, again.sent_queue) == (JobState.queued, H100)
    assert again.sent_at is not None and again.sent_at > stale
    assert job.id in job_ids_on(H100)


def test_a_job_a_live_thread_of_this_worker_runs_is_never_taken_back(
    session: Session, quiet: World
) -> None:
    me, other = "this-host:10", "other-host:11"
    job = _job(session, quiet, state=JobState.queued, sent_at=utcnow(), queue=QUEUE)
    assert worker._claim(job.submission_id, job.id, me)  # a thread of `me` runs it
    try:
        # Its heartbeat is late: the database was away for a while, say.
        stale = utcnow() - timedelta(seconds=get_settings().heartbeat_timeout_seconds + 5)
        _fresh(session, job).heartbeat_at = stale
        session.commit()
        assert worker.held_here(job.id)
        assert job.id not in sweep(me=me).requeued  # this process's own sweeper
        assert (_fresh(session, job).state, _fresh(session, job).worker_id) == (
            JobState.started,
            me,
        )
        # Another worker cannot know the thread lives: for it, a silent job is a lost one.
        assert job.id in sweep(me=other).requeued
    finally:
        worker._release(job.id)
    assert not worker.held_here(job.id)


def test_a_lab_regrades_lost_jobs_wait_their_turn_again_behind_a_students_job(
    session: Session, quiet: World
) -> None:
    sent = utcnow()
    regrade = [
        _job(session, quiet, state=JobState.queued, sent_at=sent, queue=QUEUE, background=True)
        for _ in range(BACKGROUND_IN_FLIGHT)
    ]
    upload = _job(session, quiet, state=JobState.queued, sent_at=sent + timedelta(seconds=1))
    # The broker lost everything; a student's upload waits (sent again in this sweep).
    report = sweep(now=sent + _overdue() + timedelta(seconds=1))
    assert {job.id for job in regrade} <= set(report.lost)
    assert upload.id in report.lost
    assert report.background == []  # not while a student's job waits
    for job in regrade:
        held = _fresh(session, job)
        assert (held.state, held.sent_at, held.sent_queue) == (JobState.queued, None, QUEUE)
    on_broker = job_ids_on(QUEUE)
    assert upload.id in on_broker and not {job.id for job in regrade} & set(on_broker)
    # The upload is graded; the regrade goes on, as many at a time as before.
    _fresh(session, upload).state = JobState.done.value
    session.commit()
    assert set(sweep().background) == {job.id for job in regrade}
    assert set(job_ids_on(QUEUE)) == {job.id for job in regrade}


def test_a_lab_regrades_compiled_jobs_wait_their_turn_for_the_gpu(
    session: Session, quiet: World
) -> None:
    compiled = [
        _job(session, quiet, state=JobState.waiting_gpu, background=True)
        for _ in range(BACKGROUND_IN_FLIGHT + 1)
    ]
    upload = _job(session, quiet, state=JobState.queued, sent_at=utcnow(), queue=QUEUE)
    report = sweep(has_gpu=True, gpu_model="NVIDIA H200")
    # Moved off waiting_gpu onto their queue's books, but none sent while a student waits.
    assert {job.id for job in compiled} <= set(report.to_gpu)
    assert report.background == []
    assert job_ids_on(GPU_QUEUE) == []
    for job in compiled:
        held = _fresh(session, job)
        assert (held.state, held.sent_at, held.sent_queue) == (
            JobState.queued,
            None,
            GPU_QUEUE,
        )
    _fresh(session, upload).state = JobState.done.value
    session.commit()
    # Then a few at a time, to the GPU queue they belong on, by any worker's sweep.
    first = sweep().background
    assert len(first) == BACKGROUND_IN_FLIGHT
    assert set(job_ids_on(GPU_QUEUE)) == set(first)
    assert sweep().background == []  # the first ones are still on the broker's books


def test_a_lab_regrades_job_whose_worker_died_waits_its_turn_again(
    session: Session, quiet: World
) -> None:
    stale = utcnow() - timedelta(seconds=get_settings().heartbeat_timeout_seconds + 5)
    job = _job(session, quiet, state=JobState.started, sent_at=stale, background=True)
    held = _fresh(session, job)
    held.worker_id, held.heartbeat_at, held.attempt = "gone-host:1", stale, 1
    held.taken_sent_at, held.taken_queue = stale, QUEUE
    upload = _job(session, quiet, state=JobState.queued, sent_at=utcnow(), queue=QUEUE)
    session.commit()
    report = sweep(me="sweeping-host:2")
    assert job.id in report.requeued and report.background == []
    back = _fresh(session, job)
    assert (back.state, back.sent_at, back.sent_queue) == (JobState.queued, None, QUEUE)
    assert job.id not in job_ids_on(QUEUE)
    _fresh(session, upload).state = JobState.done.value
    session.commit()
    assert sweep().background == [job.id]
