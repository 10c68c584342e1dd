"""Lost and unsent jobs are found and sent again; out of attempts, the student is told why."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.settings import get_settings
from app.grading.sweeper import sweep
from app.grading.worker import NOT_YOUR_FAULT
from app.jobs.celery_app import QUEUE
from app.submissions.models import GradingJob, JobState, Status, Submission, SubmissionEvent
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
    assert job.id in sweep().lost
    session.expire_all()
    assert session.get_one(GradingJob, job.id).sent_at > long_ago
    assert job.id not in sweep().lost


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
    from app.jobs.celery_app import celery_app

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


def _sent_not_started(session: Session, *, sent_at: Any, queue: str = QUEUE) -> GradingJob:
    world = make_world(session)
    _, job = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.queued,
        job_state=JobState.queued,
        created_at=sent_at,
    )
    job.sent_at, job.sent_queue = sent_at, queue
    session.commit()
    return job


# Every test shares one database, and whether a queue moved past a job is read from all of
# its jobs; these tests put their jobs in the future (and sweep "then") to be the newest.
_days_ahead = itertools.count(1)


def _future() -> Any:
    # A day further for each test, so no earlier test's stamps are newer than this test's.
    return utcnow() + timedelta(days=next(_days_ahead))


def test_a_job_the_broker_lost_is_sent_again_soon_when_the_broker_holds_nothing(
    session: Session,
) -> None:
    from app.jobs.celery_app import celery_app

    sent = _future()
    job = _sent_not_started(session, sent_at=sent)
    # The broker restarted without persistence: nothing is left on the main queue.
    celery_app.control.purge()
    soon = get_settings().resend_unstarted_after_seconds
    assert job.id not in sweep(now=sent + timedelta(seconds=soon / 2)).lost  # not overdue yet
    celery_app.control.purge()  # what that sweep sent for other tests' jobs
    assert job.id in sweep(now=sent + timedelta(seconds=soon + 1)).lost
    session.expire_all()
    assert session.get_one(GradingJob, job.id).sent_at != sent  # sent again, noted


def test_a_job_waiting_behind_a_long_queue_is_not_sent_again(session: Session) -> None:
    from app.jobs.celery_app import celery_app

    celery_app.control.purge()
    sent = _future()
    job = _sent_not_started(session, sent_at=sent)
    # Its message is on the broker, and no job sent after it has been taken yet.
    _publish(job)
    session.refresh(job)
    job.sent_at = sent  # as if sent then
    session.commit()
    soon = get_settings().resend_unstarted_after_seconds
    assert job.id not in sweep(now=sent + timedelta(seconds=soon + 1)).lost
    celery_app.control.purge()


def test_a_job_the_queue_moved_past_is_sent_again(session: Session) -> None:
    from app.jobs.celery_app import celery_app

    celery_app.control.purge()
    sent = _future()
    job = _sent_not_started(session, sent_at=sent)
    _publish(job)  # the broker holds one
    session.refresh(job)
    job.sent_at = sent
    soon = get_settings().resend_unstarted_after_seconds
    # A job sent a second after it was taken: stamps that close may reach the broker out of
    # order (they are taken at the commit), so that alone does not say the first is lost.
    close = _sent_not_started(session, sent_at=sent + timedelta(seconds=1))
    close.state = JobState.started.value
    close.taken_sent_at, close.taken_queue = close.sent_at, QUEUE
    session.commit()
    assert job.id not in sweep(now=sent + timedelta(seconds=soon + 1)).lost
    # A job sent well after it was taken: the queue hands out oldest first, so the first
    # one's message was taken too, by a worker that died before it claimed the job.
    later = _sent_not_started(session, sent_at=sent + timedelta(seconds=soon + 1))
    later.state = JobState.started.value
    later.started_at = later.heartbeat_at = sent + timedelta(seconds=soon + 2)
    later.worker_id = "busy-host:1"
    later.taken_sent_at, later.taken_queue = later.sent_at, QUEUE  # the message it carried
    session.commit()
    report = sweep(now=sent + timedelta(seconds=soon + 3))
    assert job.id in report.lost
    assert later.id not in report.lost
    celery_app.control.purge()


def test_a_second_copy_taken_early_does_not_condemn_the_jobs_sent_between_its_copies(
    session: Session,
) -> None:
    from app.jobs.celery_app import celery_app

    celery_app.control.purge()
    sent = _future()
    waiting = _sent_not_started(session, sent_at=sent)
    _publish(waiting)
    session.refresh(waiting)
    waiting.sent_at = sent
    # A job first sent before it was sent again later (its sent_at is the later send), and a
    # worker claimed it with its first message: that says the queue passed its first send only.
    twice = _sent_not_started(session, sent_at=sent + timedelta(seconds=30))
    twice.state = JobState.started.value
    twice.started_at = twice.heartbeat_at = sent + timedelta(seconds=31)
    twice.worker_id = "busy-host:1"
    twice.taken_sent_at, twice.taken_queue = sent - timedelta(seconds=5), QUEUE
    session.commit()
    soon = get_settings().resend_unstarted_after_seconds
    assert waiting.id not in sweep(now=sent + timedelta(seconds=soon + 31)).lost
    celery_app.control.purge()


def test_a_worker_notes_the_stamp_of_the_message_it_claimed_the_job_with(
    session: Session,
) -> None:
    from app.grading.tasks import grade

    sent = _future()
    job = _sent_not_started(session, sent_at=sent)
    # The message of an earlier send of this job, taken now.
    earlier = sent - timedelta(seconds=40)
    grade.apply(
        args=[job.submission_id, job.id], kwargs={"sent_at": earlier.isoformat(), "queue": QUEUE}
    ).get()
    session.expire_all()
    claimed = session.get_one(GradingJob, job.id)
    assert claimed.attempt == 1
    assert (claimed.taken_sent_at, claimed.taken_queue) == (earlier, QUEUE)


def test_two_sweepers_that_find_the_same_lost_job_send_it_once(session: Session) -> None:
    from app.core.database import session_scope
    from app.grading.sweeper import _stamp_if_unchanged

    job = _sent_not_started(session, sent_at=_future())
    # Both read the job as it was; the first to write its stamp sends it, the other does not.
    with session_scope() as first, session_scope() as second:
        mine, theirs = first.get_one(GradingJob, job.id), second.get_one(GradingJob, job.id)
        assert _stamp_if_unchanged(first, mine.id, mine.sent_at, QUEUE, utcnow())
        first.commit()
        assert not _stamp_if_unchanged(second, theirs.id, theirs.sent_at, QUEUE, utcnow())


def _publish(job: GradingJob) -> None:
    """Put the job's message on the broker now (as its send after a commit would)."""
    from app.jobs.send import publish
    from app.submissions.service import grading_message

    publish(
        grading_message(
            submission_id=job.submission_id, job_id=job.id, queue=QUEUE, stamped_at=utcnow()
        )
    )


def test_a_sweep_while_the_database_is_locked_logs_a_line_not_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging
    import sqlite3

    from app.core.database import session_scope
    from app.grading import programs
    from app.grading.models import KeptProgram
    from app.grading.sweeper import SweeperThread
    from graders.results import CompileResult

    path = get_settings().sqlite_file()
    if path is None:
        pytest.skip("needs the SQLite test database: the test locks its file")
    # Something the sweep must write: the kept program of a job that has ended.
    with session_scope() as session:
        world = make_world(session)
        _, job = make_submission(
            session, user=world.student.user, lab=world.lab, job_state=JobState.failed
        )
        kept = CompileResult(ok=True, message="Compiled.", arch="sm_90", cubin=b"\x7fELF")
        assert programs.keep(session, job_id=job.id, result=kept, recipe="r")
    locker = sqlite3.connect(path, timeout=0)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        with caplog.at_level(logging.INFO, logger="app.grading.sweeper"):
            SweeperThread(has_gpu=False).sweep_once(0.5)
    finally:
        locker.rollback()
        locker.close()
    said = [r for r in caplog.records if r.name == "app.grading.sweeper"]
    assert [r.levelno for r in said] == [logging.WARNING], [r.getMessage() for r in said]
    SweeperThread(has_gpu=False).sweep_once(0.5)  # the database back: the next sweep does it
    with session_scope() as session:
        assert session.get(KeptProgram, job.id) is None
    assert said[0].exc_info is None and "the database is away" in said[0].getMessage()
