"""The worker registry and the staff's view of the queue, on the real test database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.fleet import service
from app.jobs import workers
from app.jobs.models import Worker
from app.submissions.models import JobState, Status
from tests.app.conftest import make_world, unique
from tests.app.factories import make_submission


def register(name: str, *, gpu_model: str = "", can_run: bool = False, gpu: str = "") -> None:
    workers.register_worker(
        name=name,
        host="test-host",
        pid=4242,
        gpu=gpu,
        gpu_model=gpu_model,
        arch="sm_90",
        can_compile=True,
        can_run=can_run,
        note="" if can_run else "compiles only",
        queues=["grading"],
        version="test",
    )


def test_a_worker_registers_beats_and_stops(session: Session) -> None:
    name = unique("host:")
    register(name, gpu_model="NVIDIA H200", can_run=True, gpu="1")
    row = session.query(Worker).filter_by(name=name).one()
    assert (row.gpu, row.gpu_model, row.can_run, row.stopped_at) == ("1", "NVIDIA H200", True, None)
    first = row.heartbeat_at
    assert workers.beat(name)
    session.expire_all()
    assert row.heartbeat_at >= first
    assert any(w.name == name for w in workers.live_workers(session))
    workers.mark_stopped(name)
    session.expire_all()
    assert row.stopped_at is not None
    assert all(w.name != name for w in workers.live_workers(session))
    # A beat after a stop (the row marked stopped by mistake) makes it alive again.
    assert workers.beat(name)
    assert not workers.beat(unique("nobody:"))
    workers.mark_stopped(name)


def test_a_queued_submission_says_when_no_live_worker_could_take_it(session: Session) -> None:
    name = unique("host:")
    register(name)
    assert workers.queued_message(session, "Waiting.") == ("Waiting.", "")
    # An hour on, every worker of this test run is silent.
    later = utcnow() + timedelta(hours=1)
    message, note = workers.queued_message(session, "Waiting.", now=later)
    # The student reads a sentence for students; what to start and where is the staff's.
    assert message.startswith("Waiting. The grader is not running at the moment")
    assert "/admin/system" not in message and "`" not in message
    assert note.startswith("No grading worker has been heard from")
    assert "/admin/system" in note and "kernelgrader worker" in note
    workers.mark_stopped(name)


def test_where_the_fleet_borrows_workers_a_queued_upload_says_one_is_coming(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELGRADER_FLEET_BACKEND", "slurm")
    later = utcnow() + timedelta(hours=1)
    message, note = workers.queued_message(session, "Waiting.", now=later)
    assert message == (
        "Waiting. Graders start when there is work to do, so it waits a few minutes for one; "
        "nothing is lost, and it is graded as soon as one is up."
    )
    assert note.startswith("No grading worker has been heard from in the last 30 s; the fleet ")
    assert "from Slurm as the queue grows" in note and "/admin/fleet" in note
    # Settings that do not hold: the usual sentences (the fleet's page says what is wrong).
    monkeypatch.setenv("KERNELGRADER_FLEET_CEILING", "many")
    message, _ = workers.queued_message(session, "Waiting.", now=later)
    assert message.startswith("Waiting. The grader is not running at the moment")


def test_a_job_for_a_gpu_model_nobody_serves_gets_a_note_for_staff(session: Session) -> None:
    name = unique("host:")
    register(name, gpu_model="NVIDIA H200", can_run=True)
    assert workers.no_runner_note(session, required_key="h200", model="H200") == ""
    assert workers.no_runner_note(session, required_key="", model="") == ""
    note = workers.no_runner_note(session, required_key="b200", model="B200")
    assert "run it on B200 GPUs" in note and "--gpus all" in note
    workers.mark_stopped(name)


def test_the_snapshot_shows_held_jobs_the_queue_and_errors_of_the_viewers_courses(
    session: Session,
) -> None:
    world, other = make_world(session), make_world(session)
    before = service.fleet_snapshot(session)
    name = unique("host:")
    register(name, gpu_model="NVIDIA H200", can_run=True, gpu="0")
    _, held = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.running,
        job_state=JobState.started,
    )
    held.worker_id = name
    queued_at = utcnow() - timedelta(days=400)  # older than anything else in the test run
    waiting, queued = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.queued,
        job_state=JobState.queued,
        created_at=queued_at,
    )
    _, parked = make_submission(
        session,
        user=other.student.user,
        lab=other.lab,
        status=Status.compiled,
        job_state=JobState.waiting_gpu,
    )
    parked.gpu_model = "h100"
    _, failed = make_submission(
        session,
        user=other.student.user,
        lab=other.lab,
        status=Status.error,
        job_state=JobState.failed,
    )
    failed.error = "compile: the compiler stopped unexpectedly"
    failed.finished_at = utcnow()
    session.commit()

    everything = service.fleet_snapshot(session)
    assert everything.queue.queued == before.queue.queued + 1
    assert everything.queue.started == before.queue.started + 1
    assert everything.queue.waiting_gpu == before.queue.waiting_gpu + 1
    assert everything.queue.waiting_by_model.get("h100", 0) >= 1
    assert everything.queue.oldest_submission_id == waiting.id
    assert everything.queue.oldest_queued_at == queued_at
    mine = next(w for w in everything.workers if w.name == name)
    assert mine.alive and mine.state == "alive" and mine.can == "compile, run"
    assert mine.job is not None and mine.job.job_id == held.id and mine.job.visible
    assert failed.id in [e.job_id for e in everything.errors]

    # A TA of the first course: workers and totals for all, jobs and errors of theirs only.
    theirs = service.fleet_snapshot(session, course_ids={world.course.id})
    assert {j.job_id for j in theirs.jobs} == {held.id, queued.id}
    assert failed.id not in [e.job_id for e in theirs.errors]
    assert theirs.queue.waiting_gpu == everything.queue.waiting_gpu
    mine = next(w for w in theirs.workers if w.name == name)
    assert mine.job is not None and mine.job.lab == world.lab.slug
    hidden = service.fleet_snapshot(session, course_ids={other.course.id})
    mine = next(w for w in hidden.workers if w.name == name)
    assert mine.job is not None and not mine.job.visible and mine.job.lab == ""

    for job in (held, queued, parked):
        job.state = JobState.done.value
    session.commit()
    workers.mark_stopped(name)
