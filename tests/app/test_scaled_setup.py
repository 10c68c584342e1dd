"""The larger setup for real: PostgreSQL as the database and Redis as the broker.

Needs the servers that `scripts/ci-services.sh` starts (see tests/app/scaled.py); skipped
with that hint elsewhere, and failing under CI when their URLs are missing.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from celery import Celery
from sqlalchemy import inspect, select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app.cli import cli
from app.cli.database import upgrade_database
from app.core.database import engine_for
from app.grading.tasks import grade
from app.submissions.models import GradingJob, JobState, Status, Submission
from tests.app.conftest import GOOD_KERNEL, TEST_LAB, World, unique
from tests.app.grading.test_celery_worker import worker_command
from tests.app.grading.test_worker import SYNTAX_ERROR
from tests.app.scaled import (
    POSTGRES_VAR,
    REDIS_VAR,
    fresh_database,
    purge_grading_queues,
    required_url,
    sending_through,
    settings_from,
)

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture(scope="module")
def postgres_server() -> str:
    return required_url(POSTGRES_VAR)


@pytest.fixture(scope="module")
def redis_url() -> str:
    return required_url(REDIS_VAR)


@pytest.fixture(scope="module")
def on_postgres(postgres_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The service on a fresh PostgreSQL database, migrated, for this module's tests.

    Jobs the API sends go to a broker file of this module's own, so no SQLite-backed worker
    of another test can take a job that names rows of this database.
    """
    broker = tmp_path_factory.mktemp("scaled-broker") / "broker.sqlite"
    with fresh_database(postgres_server) as url, settings_from(database_url=url):
        upgrade_database()
        with sending_through(f"sqla+sqlite:///{broker}"):
            yield url


def cli_ok(*args: str) -> str:
    result = runner.invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _tool_env(**extra: str) -> dict[str, str]:
    # The virtualenv's tools (alembic, kernelgrader) first, whichever Python runs the tests.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, **extra}


def test_migrations_build_the_models_schema_on_postgres(postgres_server: str) -> None:
    with fresh_database(postgres_server) as url:
        env = _tool_env(KERNELGRADER_DATABASE_URL=url)
        # The CI script: upgrade an empty database to head, then `alembic check`, which
        # fails when the models and the migrations disagree on PostgreSQL's types.
        checked = subprocess.run(
            ["scripts/alembic-check.sh"], cwd=REPO, env=env, capture_output=True, text=True
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "No new upgrade operations detected" in checked.stdout + checked.stderr
        engine = engine_for(url)
        assert {"users", "submissions", "grading_jobs", "case_results"} <= set(
            inspect(engine).get_table_names()
        )
        # And back down: the downgrade drops every table but Alembic's own.
        down = subprocess.run(
            ["alembic", "downgrade", "base"], cwd=REPO, env=env, capture_output=True, text=True
        )
        assert down.returncode == 0, down.stdout + down.stderr
        assert set(inspect(engine).get_table_names()) == {"alembic_version"}
        engine.dispose()


async def test_the_api_flow_on_postgres(
    on_postgres: str, client: httpx.AsyncClient, session: Session
) -> None:
    assert session.get_bind().dialect.name == "postgresql"
    # Set up the course the way an instructor does, through the CLI.
    course, email = unique("pg"), f"{unique('ada')}@example.edu"
    cli_ok("course", "create", course, "--title", "On PostgreSQL")
    cli_ok("lab", "add", course, str(TEST_LAB), "--due", "2030-01-01T12:00")
    cli_ok("user", "add", email, "--role", "student", "--course", course, "--name", "Ada")
    staff = f"{unique('ta')}@example.edu"
    cli_ok("user", "add", staff, "--role", "ta", "--course", course)
    student = {"Authorization": f"Bearer {cli_ok('token', 'create', email).split()[-1]}"}
    ta = {"Authorization": f"Bearer {cli_ok('token', 'create', staff).split()[-1]}"}

    labs = await client.get(f"/api/v1/courses/{course}/labs", headers=student)
    assert labs.status_code == 200, labs.text
    assert [lab["slug"] for lab in labs.json()] == ["scale-test"]

    ids = {}
    for name, source in {"good": GOOD_KERNEL, "broken": SYNTAX_ERROR}.items():
        r = await client.post(
            f"/api/v1/courses/{course}/labs/scale-test/submissions",
            headers=student,
            files={"file": ("scale.cu", source.encode(), "text/plain")},
        )
        assert r.status_code == 202, r.text
        sid = r.json()["id"]
        job_id = session.scalars(select(GradingJob.id).where(GradingJob.submission_id == sid)).one()
        # The Celery task itself, run in this process: claim, compile, record on PostgreSQL.
        assert grade.apply(args=[sid, job_id]).get() == (
            "compiled" if name == "good" else "compile_error"
        )
        ids[name] = sid

    good = (await client.get(f"/api/v1/submissions/{ids['good']}", headers=student)).json()
    assert good["status"] == "compiled" and good["compile_ok"] is True
    broken = (await client.get(f"/api/v1/submissions/{ids['broken']}", headers=student)).json()
    assert broken["status"] == "compile_error" and broken["score"] == 0
    assert "scale.cu(4)" in broken["compile_log"]
    # Delivered twice (a redelivery after a lost ack): the second run finds the job done.
    job_id = session.scalars(
        select(GradingJob.id).where(GradingJob.submission_id == ids["broken"])
    ).one()
    assert grade.apply(args=[ids["broken"], job_id]).get() == "duplicate"

    listed = await client.get(
        f"/api/v1/courses/{course}/submissions", params={"user": email}, headers=ta
    )
    assert sorted(item["id"] for item in listed.json()) == sorted(ids.values())
    book = await client.get(f"/api/v1/courses/{course}/gradebook.csv", headers=ta)
    (row,) = list(csv.DictReader(io.StringIO(book.text)))
    # Only the compile error has a verdict yet; it counts as zero.
    assert (row["email"], row["scale-test"], row["total"]) == (email, "0", "0")


def wait_for(session: Session, ids: list[int], worker: subprocess.Popen[str]) -> dict[int, str]:
    """Each submission's status once none is queued or compiling, or at the deadline."""
    deadline = time.monotonic() + 120
    while True:
        session.expire_all()
        statuses = {sid: session.get_one(Submission, sid).status for sid in ids}
        waiting = {Status.queued.value, Status.compiling.value}
        if not waiting & set(statuses.values()):
            return statuses
        if worker.poll() is not None or time.monotonic() > deadline:
            return statuses
        time.sleep(0.2)


@pytest.fixture
def redis_broker(on_postgres: str, redis_url: str) -> Iterator[Celery]:
    with sending_through(redis_url) as celery:
        purge_grading_queues(celery)
        yield celery
        purge_grading_queues(celery)


@pytest.mark.slow
async def test_a_worker_grades_from_redis_into_postgres(
    redis_broker: Celery,
    redis_url: str,
    on_postgres: str,
    client: httpx.AsyncClient,
    world: World,
    session: Session,
) -> None:
    # A real worker process with only the larger setup's settings: its jobs can reach it
    # through Redis alone, and its results land in PostgreSQL alone.
    env = _tool_env(KERNELGRADER_DATABASE_URL=on_postgres, KERNELGRADER_BROKER_URL=redis_url)
    worker = subprocess.Popen(
        [*worker_command(), "--loglevel", "INFO"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = ""
    try:
        ids = []
        for source in (GOOD_KERNEL, SYNTAX_ERROR):
            r = await client.post(
                f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/submissions",
                headers=world.student.auth,
                files={"file": ("scale.cu", source.encode(), "text/plain")},
            )
            assert r.status_code == 202, r.text
            ids.append(r.json()["id"])
        statuses = wait_for(session, ids, worker)
        assert worker.poll() is None, "the worker exited early"
    finally:
        worker.terminate()
        try:
            output, _ = worker.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            output, _ = worker.communicate()
    assert statuses == {ids[0]: "compiled", ids[1]: "compile_error"}, output
    jobs = session.scalars(select(GradingJob).where(GradingJob.submission_id.in_(ids))).all()
    # Sent once by the API through Redis, and taken by that worker process, once each.
    assert all(job.sent_at is not None and job.attempt == 1 for job in jobs), output
    assert {(job.worker_id or "").rsplit(":", 1)[-1] for job in jobs} == {str(worker.pid)}, output
    assert {job.state for job in jobs} == {JobState.waiting_gpu.value, JobState.failed.value}
    assert "redis://" in output, output
    assert "Traceback" not in output, output
