"""The fleet borrows workers from a real single-node Slurm (tests/app/fleet/slurm_bed.py):
a burst of uploads makes the policy submit jobs, their workers take the compile work, idle
workers drain and their jobs end, and a worker's job killed mid-grading loses nothing.

Every wait is bounded; every Slurm job a test submitted is cancelled at its end (by id)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app.cli import cli
from app.cli.database import upgrade_database
from app.core.database import session_scope
from app.core.fleet_settings import fleet_settings
from app.courses.models import Lab
from app.courses.service import add_lab
from app.fleet import slurm as slurm_commands
from app.fleet.autoscale import FleetLoop, SlurmBackend
from app.fleet.models import BorrowedState, BorrowedWorker
from app.jobs.models import Worker
from app.submissions.models import GradingJob, JobState, Status, Submission
from tests.app.conftest import GOOD_KERNEL, TEST_LAB, World
from tests.app.fleet.slurm_bed import (
    Slurm,
    environment,
    job_logs,
    slurm_or_skip,
    wait_for,
    worker_command,
    write_env_file,
)
from tests.app.scaled import sending_through, settings_from

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

# NVRTC takes seconds over this (about 4 s on a quiet 2-core machine, a minute on a busy one),
# more than scancel takes to kill its worker (with 20000 unrolled, the compile finished first
# once). Its lab allows the compiler 3 minutes.
SLOW_KERNEL = """\
extern "C" __global__ void scale(const float* src, float* dst, unsigned int n, float factor)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = src[i];
#pragma unroll
    for (int k = 0; k < 80000; ++k) x = x * src[(i + k) % n] + sinf(x * (float)k);
    dst[i] = factor * src[i] + 0.0f * x;
}
"""
# Seconds: the fleet's passes are run by the test; the workers beat fast so a killed one is
# found quickly, and drain quickly once idle.
IDLE_S = 3.0
HEARTBEAT_TIMEOUT_S = 3.0
WORKER_START_S = 150.0


@pytest.fixture(scope="module")
def slurm() -> Slurm:
    return slurm_or_skip()


@dataclass
class Bed:
    slurm: Slurm
    folder: Path
    loop: FleetLoop

    def pass_(self) -> None:
        report = self.loop.once()
        assert report is not None, "another fleet loop holds the lease"
        assert not report.errors, report.errors

    def logs(self) -> str:
        return job_logs(self.folder)

    def rows(self) -> list[BorrowedWorker]:
        with session_scope() as session:
            found = list(session.scalars(select(BorrowedWorker).order_by(BorrowedWorker.id)))
            session.expunge_all()
        return found


@pytest.fixture
def bed(slurm: Slurm, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    """A database and broker of the test's own, the fleet's settings for this Slurm, and at
    the end every job the test's fleet submitted cancelled."""
    folder = tmp_path_factory.mktemp("slurm-fleet")
    database = f"sqlite:///{folder / 'fleet.sqlite'}"
    broker = f"sqla+sqlite:///{folder / 'broker.sqlite'}"
    env_file = write_env_file(
        folder / "worker.env",
        env="test",
        data_dir=str(folder / "data"),
        database_url=database,
        broker_url=broker,
        secret_key="test-secret-key-not-for-production",
        grading_secret="test-grading-secret",
        run_on_gpu="false",
        prestart="false",
        heartbeat_seconds="0.5",
        heartbeat_timeout_seconds=str(HEARTBEAT_TIMEOUT_S),
        sweep_seconds="0.5",
        broker_polling_seconds="0.1",
    )
    fleet = {
        "KERNELGRADER_FLEET_BACKEND": "slurm",
        "KERNELGRADER_FLEET_CEILING": "2",
        "KERNELGRADER_FLEET_JOBS_PER_WORKER": "2",
        "KERNELGRADER_FLEET_IDLE_SECONDS": str(IDLE_S),
        "KERNELGRADER_FLEET_TICK_SECONDS": "1",
        "KERNELGRADER_SLURM_PARTITION": slurm.partition,
        "KERNELGRADER_SLURM_CONSTRAINTS": f'{{"": "{slurm.constraint}"}}',
        "KERNELGRADER_SLURM_CPUS": "1",
        "KERNELGRADER_SLURM_MEMORY": "1500M",
        "KERNELGRADER_SLURM_TIME_LIMIT": "15",
        "KERNELGRADER_SLURM_ENV_FILE": str(env_file),
        "KERNELGRADER_SLURM_CHDIR": str(folder),
        "KERNELGRADER_SLURM_WORKER_COMMAND": worker_command(),
        "KERNELGRADER_SLURM_JOB_NAME": f"kg-test-{folder.name}",
        "SLURM_CONF": slurm.conf,
    }
    with (
        settings_from(
            database_url=database,
            heartbeat_timeout_seconds=str(HEARTBEAT_TIMEOUT_S),
            data_dir=str(folder / "data"),
        ),
        environment(**fleet),
    ):
        upgrade_database()
        with sending_through(broker):
            settings = fleet_settings()
            bed = Bed(slurm, folder, FleetLoop(SlurmBackend(settings), settings))
            try:
                yield bed
            finally:
                submitted = [row.job_id for row in bed.rows()]
                for job_id in submitted:
                    slurm.run("scancel", job_id)
                if submitted:
                    wait_for(
                        "the test's Slurm jobs ending",
                        lambda: all(
                            s.phase == "ended" for s in slurm_commands.observe(submitted).values()
                        ),
                        timeout=60,
                    )


def slow_compile_lab(session: Session, world: World, folder: Path) -> Lab:
    """The test lab under another id, whose compiler may take 3 minutes."""
    folder.mkdir()
    shutil.copy(TEST_LAB / "lab.md", folder / "lab.md")
    spec = (TEST_LAB / "lab.toml").read_text()
    spec = spec.replace('id = "scale-test"', 'id = "scale-slow"')
    spec = spec.replace("compile_seconds = 20", "compile_seconds = 180")
    assert 'id = "scale-slow"' in spec and "compile_seconds = 180" in spec
    (folder / "lab.toml").write_text(spec)
    lab = add_lab(session, course=world.course, ref=str(folder))
    session.commit()
    return lab


async def _upload(
    client: httpx.AsyncClient, world: World, source: str, lab: Lab | None = None
) -> int:
    r = await client.post(
        f"/api/v1/courses/{world.course.slug}/labs/{(lab or world.lab).slug}/submissions",
        headers=world.student.auth,
        files={"file": ("scale.cu", source.encode(), "text/plain")},
    )
    assert r.status_code == 202, r.text
    return int(r.json()["id"])


def _jobs(session: Session, ids: list[int]) -> list[GradingJob]:
    session.expire_all()
    return list(session.scalars(select(GradingJob).where(GradingJob.submission_id.in_(ids))))


async def test_a_burst_borrows_workers_that_compile_then_drain(
    bed: Bed, client: httpx.AsyncClient, world: World, session: Session
) -> None:
    ids = [await _upload(client, world, GOOD_KERNEL) for _ in range(4)]

    # Four jobs to compile, one worker per two, a ceiling of two: two jobs submitted.
    bed.pass_()
    rows = bed.rows()
    assert [r.state for r in rows] == ["pending", "pending"], rows
    assert "4 jobs (4 to compile): one worker per 2 makes 2." in rows[0].reason
    seen = slurm_commands.observe([r.job_id for r in rows])
    assert {s.phase for s in seen.values()} <= {"pending", "running"}, seen
    status = CliRunner().invoke(cli, ["fleet", "status"])
    assert status.exit_code == 0, status.output
    assert all(f"slurm:{r.job_id}" in status.output for r in rows), status.output

    # Their workers start on the node, register from their jobs and compile the burst.
    def compiled() -> list[GradingJob] | None:
        jobs = _jobs(session, ids)
        return jobs if all(j.state == JobState.waiting_gpu.value for j in jobs) else None

    jobs = wait_for(
        "the burst compiled by the borrowed workers",
        compiled,
        timeout=WORKER_START_S,
        between=bed.pass_,
        logs=bed.logs,
    )
    with session_scope() as s:
        borrowed = {
            w.name: w.fleet_job
            for w in s.scalars(select(Worker).where(Worker.fleet_job.like("slurm:%")))
        }
    keys = {f"slurm:{r.job_id}" for r in rows}
    assert set(borrowed.values()) <= keys and borrowed, borrowed
    # Each job taken once, by a worker running in one of the fleet's Slurm jobs.
    assert all(j.attempt == 1 and j.worker_id in borrowed for j in jobs), [
        (j.attempt, j.worker_id) for j in jobs
    ]
    for sid in ids:
        submission = session.get_one(Submission, sid)
        assert submission.status == Status.compiled.value
        assert submission.compile_ok is True

    # Nothing left to compile, and these workers cannot run kernels: idle, they drain, exit,
    # and Slurm ends their jobs.
    def all_ended() -> list[BorrowedWorker] | None:
        found = bed.rows()
        return found if all(r.state == BorrowedState.ended.value for r in found) else None

    ended = wait_for(
        "the idle workers draining and their jobs ending",
        all_ended,
        timeout=60 + IDLE_S,
        every=0.5,
        between=bed.pass_,
        logs=bed.logs,
    )
    linked = [r for r in ended if r.worker_name]
    assert linked, ended
    for row in linked:
        assert row.can_run is False and row.worker_note, row.worker_note
        assert row.drain_at is not None and row.scheduler_state == "COMPLETED", row.end_reason
        assert row.end_reason.startswith(
            "Drained: idle 3 s or more, not needed: the plan wants 0 for labs that name no GPU "
            "model, "
        ), row.end_reason
    plan = bed.loop.once()
    assert plan is not None and plan.plan is not None
    assert not plan.submitted, "the jobs waiting for a GPU are not counted after a no-GPU worker"
    (model,) = plan.plan.models
    assert model.wanted == 0
    assert any("came up unable to run kernels" in r.text for r in model.reasons), model.reasons
    with session_scope() as s:
        stopped = s.scalars(select(Worker.stopped_at).where(Worker.name.in_(borrowed))).all()
    assert all(at is not None for at in stopped), "a drained worker marks itself stopped"


async def test_a_worker_job_killed_mid_grading_loses_nothing(
    bed: Bed, client: httpx.AsyncClient, world: World, session: Session
) -> None:
    lab = slow_compile_lab(session, world, bed.folder / "scale-slow")
    sid = await _upload(client, world, SLOW_KERNEL, lab)
    bed.pass_()
    (first,) = bed.rows()

    def held() -> GradingJob | None:
        (job,) = _jobs(session, [sid])
        return job if job.state == JobState.started.value and job.worker_id else None

    job = wait_for(
        "a borrowed worker taking the slow job", held, timeout=WORKER_START_S, every=0.1,
        logs=bed.logs,
    )  # fmt: skip
    killer = job.worker_id
    # Killed as a node failure would kill it: no warm shutdown, mid-compile. Not with scancel:
    # Slurm cancels a job (even `scancel --signal=KILL`) with SIGTERM and sends SIGKILL only
    # KillWait seconds later, and in between Celery's warm shutdown finishes the compile it
    # holds and records it (attempt 1), which is right for a cancel but tests nothing here.
    # The worker runs on this host as the batch step's process, named by its id (host:pid).
    host, pid = killer.rsplit(":", 1)
    assert host == socket.gethostname(), killer
    os.kill(int(pid), signal.SIGKILL)

    def graded() -> GradingJob | None:
        (again,) = _jobs(session, [sid])
        return again if again.state == JobState.waiting_gpu.value else None

    done = wait_for(
        "the killed worker's job sent again and compiled by another worker",
        graded,
        timeout=WORKER_START_S,
        every=0.5,
        between=bed.pass_,
        logs=bed.logs,
    )
    # One job, taken a second time by a worker of another Slurm job, recorded once.
    assert done.attempt == 2 and done.worker_id != killer, (done.attempt, done.worker_id)
    assert len(_jobs(session, [sid])) == 1
    submission = session.get_one(Submission, sid)
    assert submission.status == Status.compiled.value and submission.compile_ok is True
    rows = {r.job_id: r for r in bed.rows()}
    assert rows[first.job_id].state == BorrowedState.ended.value
    assert rows[first.job_id].scheduler_state in {"CANCELLED", "FAILED"}, rows[first.job_id]
    assert "sent again once its heartbeat" in rows[first.job_id].end_reason
    assert len(rows) == 2, "one worker borrowed to replace the killed one"
    with session_scope() as s:
        gone = s.scalars(select(Worker).where(Worker.name == killer)).one()
        assert gone.stopped_at is not None, "a worker whose job ended is not shown alive"
