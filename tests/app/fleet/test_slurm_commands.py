"""The Slurm backend's commands: the job script and sbatch's options from the settings, what
squeue and sacct print read back, and (against the real single-node Slurm where it runs) a
refusal said in a sentence, and jobs whose worker never came or will not drain cancelled."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.cli.database import upgrade_database
from app.core.database import session_scope, utcnow
from app.core.fleet_settings import FleetSettings
from app.fleet import slurm as commands
from app.fleet.autoscale import FleetLoop, SlurmBackend, take_lease
from app.fleet.models import BorrowedState, BorrowedWorker
from app.fleet.slurm import JobStatus, SlurmError
from app.jobs import workers
from app.jobs.models import Worker
from app.submissions.models import JobState
from tests.app.conftest import make_world
from tests.app.factories import make_submission
from tests.app.fleet.slurm_bed import Slurm, environment, slurm_or_skip, wait_for
from tests.app.scaled import settings_from

SETTINGS = FleetSettings(
    slurm_partition="gpu",
    slurm_account="cs-101",
    slurm_qos="grading",
    slurm_time_limit="2:00:00",
    slurm_cpus=6,
    slurm_memory="24G",
    slurm_constraints={"": "", "h100": "h100|h100_nvl"},
    slurm_env_file="/shared/kernel grader/worker.env",
    slurm_setup="module load cuda/12.4",
    slurm_worker_command="/opt/kg/bin/kernelgrader worker",
    slurm_chdir="/shared/kernel-grader",
    slurm_signal_seconds=300,
)


def test_sbatch_asks_for_one_gpu_of_the_model_with_every_setting() -> None:
    args = commands.sbatch_args(SETTINGS, "h100")
    assert args == [
        "sbatch",
        "--parsable",
        "--job-name=kernelgrader-worker",
        "--no-requeue",
        "--export=NONE",
        "--cpus-per-task=6",
        "--mem=24G",
        "--time=2:00:00",
        "--output=kernelgrader-worker-%j.log",
        "--gres=gpu:1",
        "--partition=gpu",
        "--account=cs-101",
        "--qos=grading",
        "--constraint=h100|h100_nvl",
        "--chdir=/shared/kernel-grader",
        "--signal=B:TERM@300",
    ]
    # Labs that name no model: no constraint; empty settings leave their options out.
    bare = FleetSettings(slurm_gres="", slurm_signal_seconds=0)
    assert commands.sbatch_args(bare, "") == [
        "sbatch",
        "--parsable",
        "--job-name=kernelgrader-worker",
        "--no-requeue",
        "--export=NONE",
        "--cpus-per-task=8",
        "--mem=32G",
        "--time=04:00:00",
        "--output=kernelgrader-worker-%j.log",
    ]


def test_a_model_without_a_constraint_is_not_borrowed_for() -> None:
    assert commands.cannot_place(SETTINGS, "h100") is None
    assert commands.cannot_place(SETTINGS, "") is None
    why = commands.cannot_place(SETTINGS, "a100")
    assert why is not None and "GPU model a100" in why and "KERNELGRADER_SLURM_CONSTRAINTS" in why


def test_the_job_script_names_its_job_sources_the_env_file_and_becomes_the_worker(
    tmp_path: Path,
) -> None:
    env_file = tmp_path / "kernel grader" / "worker.env"
    env_file.parent.mkdir()
    env_file.write_text("KERNELGRADER_DATABASE_URL=postgresql+psycopg://kg:pw@db/kg\n")
    settings = FleetSettings(
        slurm_env_file=str(env_file),
        slurm_setup="export SETUP_RAN=yes",
        # What the worker would see: its environment, and its pid (the batch shell's, by exec).
        slurm_worker_command="bash -c 'echo \"pid=$$ ppid=$PPID\"; env'",
    )
    script = commands.job_script(settings, "h100")
    assert script.startswith("#!/bin/bash\n# A kernelgrader worker for GPU model h100")
    ran = subprocess.run(
        ["bash", "-c", f"echo \"shell=$$\"; exec bash -s <<'EOF'\n{script}EOF"],
        env={"PATH": os.environ["PATH"], "SLURM_JOB_ID": "4711"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    shell = lines[0].removeprefix("shell=")
    assert lines[1].startswith(f"pid={shell} "), "exec: the worker is the batch shell itself"
    assert "KERNELGRADER_FLEET_JOB=slurm:4711" in lines
    assert "KERNELGRADER_DATABASE_URL=postgresql+psycopg://kg:pw@db/kg" in lines
    assert "SETUP_RAN=yes" in lines
    # No secret in the script itself: Slurm keeps it in its records.
    assert "pw@db" not in script


def test_squeue_and_sacct_lines_read_back() -> None:
    listed = commands.parse_squeue(
        "12|PENDING|Priority|\n13|RUNNING|None|gpu-node-4\n14|TIMEOUT|TimeLimit|gpu-node-2\n\n"
    )
    assert listed == [
        JobStatus("12", "PENDING", "Priority", ""),
        JobStatus("13", "RUNNING", "", "gpu-node-4"),
        JobStatus("14", "TIMEOUT", "TimeLimit", "gpu-node-2"),
    ]
    assert [s.phase for s in listed] == ["pending", "running", "ended"]
    past = commands.parse_sacct(
        "15|CANCELLED by 1000|gpu-node-1\n15.batch|CANCELLED|gpu-node-1\n16|NODE_FAIL|gpu-node-9\n"
    )
    assert past == [
        JobStatus("15", "CANCELLED", "", "gpu-node-1"),
        JobStatus("16", "NODE_FAIL", "", "gpu-node-9"),
    ]
    assert past[1].ended_because() == "its node failed"
    assert JobStatus("17", "WEIRD").ended_because() == "Slurm lists it as WEIRD"
    assert JobStatus("18", "PREEMPTED").phase == "ended"
    assert JobStatus("19", "COMPLETING").phase == "running"
    assert JobStatus("20", "CONFIGURING").phase == "pending"


def test_one_loop_holds_the_lease_until_it_goes_silent(tmp_path: Path) -> None:
    with settings_from(database_url=f"sqlite:///{tmp_path / 'lease.sqlite'}"):
        upgrade_database()
        now = utcnow()
        assert take_lease("slurm", "a:1", now=now, stale_after_s=90)
        assert take_lease("slurm", "a:1", now=now + timedelta(seconds=30), stale_after_s=90)
        # b waits while a renewed within 90 s; takes over once a has been silent longer.
        assert not take_lease("slurm", "b:2", now=now + timedelta(seconds=119), stale_after_s=90)
        assert take_lease("slurm", "b:2", now=now + timedelta(seconds=121), stale_after_s=90)
        assert not take_lease("slurm", "a:1", now=now + timedelta(seconds=122), stale_after_s=90)
        # Another backend has a lease of its own.
        assert take_lease("k8s", "a:1", now=now, stale_after_s=90)


# --- against the real single-node Slurm ----------------------------------------------------


@pytest.fixture(scope="module")
def slurm() -> Slurm:
    return slurm_or_skip()


@pytest.fixture
def own_db(tmp_path: Path) -> Iterator[Path]:
    with settings_from(database_url=f"sqlite:///{tmp_path / 'fleet.sqlite'}"):
        upgrade_database()
        yield tmp_path


def test_sbatch_refusing_is_said_in_a_sentence(slurm: Slurm) -> None:
    settings = FleetSettings(slurm_partition="no-such-partition", slurm_gres="")
    with environment(SLURM_CONF=slurm.conf), pytest.raises(SlurmError) as refused:
        commands.submit(settings, "")
    assert str(refused.value).startswith("sbatch refused the worker's job (")
    assert "partition" in str(refused.value).lower()
    with environment(SLURM_CONF=slurm.conf):
        assert commands.observe(["999999"]) == {}


def sleeping_fleet(slurm: Slurm, folder: Path) -> FleetSettings:
    """The fleet's settings for jobs whose "worker" is `sleep`: it never registers, never
    drains; every timeout 2 s."""
    return FleetSettings(
        fleet_backend="slurm",
        fleet_jobs_per_worker=1,
        fleet_idle_seconds=0,
        fleet_start_seconds=2,
        fleet_drain_seconds=2,
        slurm_partition=slurm.partition,
        slurm_constraints={"": slurm.constraint},
        slurm_cpus=1,
        slurm_memory="100M",
        slurm_time_limit="5",
        slurm_chdir=str(folder),
        slurm_worker_command="sleep 300",
        slurm_job_name=f"kg-test-{folder.name}",
    )


def borrowed_rows() -> dict[str, BorrowedWorker]:
    with session_scope() as s:
        found = {r.job_id: r for r in s.scalars(select(BorrowedWorker))}
        s.expunge_all()
    return found


def all_ended() -> dict[str, BorrowedWorker] | None:
    found = borrowed_rows()
    return found if all(r.state == BorrowedState.ended.value for r in found.values()) else None


def one_pass(loop: FleetLoop) -> None:
    report = loop.once()
    assert report is not None and not report.errors, report


@pytest.mark.slow
def test_a_job_whose_worker_never_registers_is_cancelled_and_replaced(
    slurm: Slurm, own_db: Path, session: Session
) -> None:
    settings = sleeping_fleet(slurm, own_db)
    # Due within the lead time: the rush is one of the reasons the job keeps.
    world = make_world(session, due_at=utcnow() + timedelta(hours=1))
    make_submission(session, user=world.student.user, lab=world.lab, job_state=JobState.queued)
    session.commit()
    loop = FleetLoop(SlurmBackend(settings), settings)
    with environment(SLURM_CONF=slurm.conf):
        try:
            one_pass(loop)
            (first,) = borrowed_rows()
            wait_for(
                "the job whose worker never came ending",
                lambda: borrowed_rows()[first].state == BorrowedState.ended.value,
                timeout=60,
                between=lambda: one_pass(loop),
            )
        finally:
            for job_id in borrowed_rows():
                slurm.run("scancel", job_id)
    rows = borrowed_rows()
    never = rows[first]
    # Shown to staff of every course: the lab is counted, not named.
    assert "A lab is due in" in never.reason and world.course.slug not in never.reason
    assert never.scheduler_state == "CANCELLED" and never.worker_name == ""
    assert never.end_reason.startswith(
        "Cancelled by the fleet: its worker did not register within 2 s of the job starting"
    ), never.end_reason
    # The job still waits: the pass that saw it end borrowed another.
    assert len(rows) == 2 and max(rows, key=int) != first


@pytest.mark.slow
def test_a_job_that_ended_before_a_pass_saw_its_worker_says_its_grading_is_sent_again(
    slurm: Slurm, own_db: Path, session: Session
) -> None:
    settings = sleeping_fleet(slurm, own_db)
    world = make_world(session, due_at=utcnow() + timedelta(hours=1))
    make_submission(session, user=world.student.user, lab=world.lab, job_state=JobState.queued)
    session.commit()
    loop = FleetLoop(SlurmBackend(settings), settings)
    with environment(SLURM_CONF=slurm.conf):
        try:
            one_pass(loop)
            (job_id,) = borrowed_rows()
            # Its worker registers, as `kernelgrader worker` does in the job, and the job is
            # killed (someone's scancel) before the fleet's next pass has seen the worker.
            name = f"node:{job_id}"
            workers.register_worker(
                name=name, host="node", pid=1, gpu="0", gpu_model="", arch="sm_90",
                can_compile=True, can_run=True, note="", queues=["grading"],
                version="test", fleet_job=f"slurm:{job_id}",
            )  # fmt: skip
            assert slurm.run("scancel", job_id).returncode == 0
            wait_for(
                "Slurm saying the job ended",
                lambda: (s := commands.observe([job_id]).get(job_id)) and s.phase == "ended",
                timeout=60,
            )
            one_pass(loop)
        finally:
            for left in borrowed_rows():
                slurm.run("scancel", left)
    ended = borrowed_rows()[job_id]
    assert ended.state == BorrowedState.ended.value and ended.worker_name == name
    assert ended.end_reason.startswith("It was cancelled (CANCELLED"), ended.end_reason
    assert "Not by the fleet" in ended.end_reason
    assert ended.end_reason.endswith(
        "Any grading its worker held is sent again once its heartbeat has been silent for 30 s."
    ), ended.end_reason


@pytest.mark.slow
def test_workers_found_running_are_adopted_then_cancelled_when_stuck_or_silent(
    slurm: Slurm, own_db: Path
) -> None:
    settings = sleeping_fleet(slurm, own_db)
    loop = FleetLoop(SlurmBackend(settings), settings)
    with environment(SLURM_CONF=slurm.conf):
        # Submitted by a loop that stopped before it recorded them.
        ids = [commands.submit(settings, "") for _ in range(2)]
        try:
            stuck, silent = ids
            for job_id, heard in ((stuck, timedelta(0)), (silent, timedelta(hours=1))):
                name = f"node:{job_id}"
                workers.register_worker(
                    name=name, host="node", pid=1, gpu="0", gpu_model="", arch="sm_90",
                    can_compile=True, can_run=True, note="", queues=["grading"],
                    version="test", fleet_job=f"slurm:{job_id}",
                )  # fmt: skip
                with session_scope() as s:
                    s.execute(
                        update(Worker)
                        .where(Worker.name == name)
                        .values(
                            started_at=utcnow() - timedelta(hours=2),
                            heartbeat_at=utcnow() - heard,
                        )
                    )
            one_pass(loop)
            adopted = borrowed_rows()
            assert set(adopted) == set(ids)
            assert adopted[stuck].reason.startswith("Found running: its worker registered")
            # Idle two hours and not needed: asked to drain; `sleep` never does.
            assert adopted[stuck].state == BorrowedState.draining.value
            ended = wait_for(
                "both adopted jobs cancelled and ended",
                all_ended,
                timeout=60,
                between=lambda: one_pass(loop),
            )
        finally:
            for job_id in ids:
                slurm.run("scancel", job_id)
    assert ended[stuck].scheduler_state == "CANCELLED"
    assert ended[stuck].end_reason.startswith(
        "Cancelled by the fleet: still running 2 s after it was asked to drain."
    ), ended[stuck].end_reason
    assert ended[silent].end_reason.startswith(
        "Cancelled by the fleet: its worker has not been heard from for 1 h."
    ), ended[silent].end_reason
    with session_scope() as s:
        worker = s.scalars(select(Worker).where(Worker.name == f"node:{stuck}")).one()
        assert worker.drain_at is not None and worker.stopped_at is not None
