"""`kernelgrader status`: the system page in a terminal, for every course."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app.cli import cli
from app.core.database import utcnow
from app.jobs import workers
from app.submissions.models import JobState, Status
from tests.app.conftest import make_world, unique
from tests.app.factories import make_submission


def test_status_prints_workers_with_their_jobs_the_queue_and_errors(session: Session) -> None:
    world = make_world(session)
    busy, held = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.running,
        job_state=JobState.started,
    )
    # Older than the other tests' jobs, so it heads the list however many they left queued.
    waiting, parked = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.compiled,
        job_state=JobState.waiting_gpu,
        created_at=utcnow() - timedelta(days=300),
    )
    parked.gpu_model = "h100"
    _, failed = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.error,
        job_state=JobState.failed,
    )
    failed.error = "run: the GPU is not healthy"
    failed.finished_at = utcnow()  # the newest error, so it heads the list
    name = unique("status-host:")
    held.worker_id = name
    session.commit()
    workers.register_worker(
        name=name,
        host="status-host",
        pid=99,
        gpu="1",
        gpu_model="NVIDIA H200",
        arch="sm_90",
        can_compile=True,
        can_run=True,
        note="",
        queues=["grading"],
        version="test",
    )
    try:
        result = CliRunner().invoke(cli, ["status"])
    finally:
        workers.mark_stopped(name)
        held.state = parked.state = JobState.done.value
        session.commit()
    assert result.exit_code == 0, result.output
    out = result.output
    line = next(
        line for line in out.splitlines() if "status-host" in line and "NVIDIA H200" in line
    )
    assert "compile, run" in line and "alive" in line and "ago" in line
    assert f"submission {busy.id}, {world.course.slug}/{world.lab.slug}" in line
    assert "Queue:" in out and "h100:" in out
    assert f"{waiting.id}  " in out  # its row in the job list
    assert f"job {failed.id}: run: the GPU is not healthy" in out
