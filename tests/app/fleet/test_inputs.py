"""The policy's inputs as the database holds them: the queue per GPU model, the due dates with
last term's upload curve, the borrowed workers, and the workers nobody borrowed.

Each test has a database of its own: the queue is read whole."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session

from app.cli.database import upgrade_database
from app.core.database import new_session, session_scope, utcnow
from app.core.fleet_settings import FleetSettings
from app.courses.service import add_lab
from app.fleet.inputs import (
    LabModels,
    current_plan,
    read_borrowed,
    read_deadlines,
    read_demand,
    read_fixed,
    read_no_gpu,
)
from app.fleet.models import BorrowedWorker
from app.fleet.policy import Demand, Phase
from app.jobs import workers
from app.jobs.models import Worker
from app.submissions.models import JobState
from tests.app.conftest import TEST_LAB, make_world
from tests.app.factories import make_submission
from tests.app.scaled import settings_from


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Session]:
    with settings_from(database_url=f"sqlite:///{tmp_path / 'fleet.sqlite'}"):
        upgrade_database()
        session = new_session()
        try:
            yield session
        finally:
            session.close()


def register(name: str, *, model: str = "", can_run: bool = True, fleet_job: str = "") -> None:
    workers.register_worker(
        name=name,
        host="node",
        pid=1,
        gpu="0",
        gpu_model=model,
        arch="sm_90",
        can_compile=True,
        can_run=can_run,
        note="" if can_run else "no CUDA driver",
        queues=["grading"],
        version="test",
        fleet_job=fleet_job,
    )


def test_the_queue_per_gpu_model_and_kind(db: Session) -> None:
    world = make_world(db)
    h100 = add_lab(db, course=world.course, ref=str(TEST_LAB / ".." / "scale-timed"),
                   gpu_model="NVIDIA H100")  # fmt: skip
    user = world.student.user
    for lab, state, compiled in [
        (world.lab, JobState.queued, False),
        (world.lab, JobState.queued, False),
        (world.lab, JobState.started, False),
        (world.lab, JobState.done, True),
        (world.lab, JobState.failed, True),
        (h100, JobState.queued, False),
        (h100, JobState.queued, True),  # compiled, sent on to the GPU queue
        (h100, JobState.waiting_gpu, True),
        (h100, JobState.started, True),
    ]:
        _, job = make_submission(db, user=user, lab=lab, job_state=state)
        job.compiled_at = utcnow() if compiled else None
    db.commit()
    assert read_demand(db, LabModels(db)) == {
        "": Demand(to_compile=2, to_run=0, in_progress=1),
        "h100": Demand(to_compile=1, to_run=2, in_progress=1),
    }


def test_due_dates_and_last_terms_upload_curve(db: Session) -> None:
    now = utcnow().replace(microsecond=0)
    last_due = now - timedelta(days=120)
    last = make_world(db, due_at=last_due)
    user = last.student.user
    for minutes_before, seconds in [(5, 10.0), (5, 20.0), (15, None), (119, None), (121, None),
                                    (-1, None)]:  # fmt: skip
        _, job = make_submission(
            db, user=user, lab=last.lab, created_at=last_due - timedelta(minutes=minutes_before)
        )
        if seconds is not None:
            job.compile_seconds, job.run_seconds = 2.0, seconds - 2.0
    now_world = make_world(db, due_at=now + timedelta(minutes=30))
    later = make_world(db, due_at=now + timedelta(hours=3))
    gone = make_world(db, due_at=now + timedelta(hours=1))
    gone.lab.archived_at = now
    db.commit()

    found = read_deadlines(db, LabModels(db), now=now, lead_seconds=7200)
    by_course = {d.course_id: d for d in found}
    assert set(by_course) == {now_world.course.id, later.course.id}
    soon = by_course[now_world.course.id]
    assert soon.label == f"{now_world.course.slug}/scale-test"
    assert soon.due_at == now + timedelta(minutes=30) and soon.students == 2
    assert soon.curve is not None
    # 10-minute bins, the last first: two uploads 5 min before, one 15 min before, one at
    # 119 min; none from before the lead time or after the due date.
    assert soon.curve.counts == (2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1)
    assert soon.curve.bin_seconds == 600 and soon.curve.students == 2
    # Jobs that measured their stages only: (10 + 20) / 2 seconds a grading.
    assert soon.curve.grading_seconds == pytest.approx(15.0)
    # Beyond the lead time: known for the floor, no curve read.
    assert by_course[later.course.id].curve is None and by_course[later.course.id].students == 0
    # No earlier term of a lab: no curve.
    lone = add_lab(db, course=later.course, ref=str(TEST_LAB / ".." / "scale-timed"),
                   due_at=now + timedelta(minutes=10))  # fmt: skip
    db.commit()
    found = read_deadlines(db, LabModels(db), now=now, lead_seconds=7200)
    assert next(d for d in found if d.label.endswith(lone.slug)).curve is None


def test_borrowed_workers_idle_times_and_gpus(db: Session) -> None:
    now = utcnow()
    rows = [
        BorrowedWorker(backend="slurm", job_id="11", state="running", worker_name="n1:1",
                       registered_at=now - timedelta(minutes=30), can_run=False,
                       worker_note="no CUDA driver", submitted_at=now - timedelta(minutes=31)),
        BorrowedWorker(backend="slurm", job_id="12", state="pending",
                       submitted_at=now - timedelta(minutes=1)),
        BorrowedWorker(backend="slurm", job_id="10", state="ended", worker_name="n0:1",
                       registered_at=now - timedelta(hours=2), can_run=True,
                       submitted_at=now - timedelta(hours=2)),
    ]  # fmt: skip
    db.add_all(rows)
    db.commit()
    register("n1:1", can_run=False, fleet_job="slurm:11")
    with session_scope() as s:
        s.execute(
            update(Worker).where(Worker.name == "n1:1").values(busy_at=now - timedelta(minutes=12))
        )
    found = {b.key: b for b in read_borrowed(db, now=now, backend="slurm")}
    assert set(found) == {"slurm:11", "slurm:12"}
    assert found["slurm:11"].phase is Phase.running
    assert found["slurm:11"].idle_seconds == pytest.approx(720, abs=1)
    assert found["slurm:12"].idle_seconds is None
    # The latest worker to register could not run kernels; an earlier one could.
    (no_gpu,) = read_no_gpu(db, backend="slurm").items()
    assert no_gpu[0] == "" and no_gpu[1].note == "no CUDA driver"
    # A later one that can run clears it.
    db.add(BorrowedWorker(backend="slurm", job_id="13", state="running", can_run=True,
                          registered_at=now - timedelta(minutes=5), submitted_at=now))  # fmt: skip
    db.commit()
    assert read_no_gpu(db, backend="slurm") == {}


def test_workers_nobody_borrowed_count_for_the_models_they_serve(db: Session) -> None:
    register("h1:1", model="NVIDIA H100 80GB HBM3")
    register("a1:1", model="NVIDIA A100-SXM4-40GB")
    register("c1:1", can_run=False)  # compiles only
    register("b1:1", model="NVIDIA H100 80GB HBM3", fleet_job="slurm:5")  # borrowed
    assert read_fixed(db, now=utcnow(), models={"", "h100", "a100", "l4"}) == {
        "": 2,
        "h100": 1,
        "a100": 1,
    }


def test_the_plan_reads_every_input(db: Session) -> None:
    world = make_world(db, due_at=utcnow() + timedelta(hours=5))
    for _ in range(7):
        make_submission(db, user=world.student.user, lab=world.lab, job_state=JobState.queued)
    db.commit()
    settings = FleetSettings(fleet_backend="slurm", fleet_jobs_per_worker=6, fleet_floor=1)
    plan = current_plan(db, now=utcnow(), settings=settings, cannot_place=lambda m: None)
    (model,) = plan.models
    assert (model.model, model.wanted, model.submit) == ("", 2, 2)
    refused = current_plan(db, now=utcnow(), settings=settings, cannot_place=lambda m: "no way")
    assert refused.models[0].submit == 0 and refused.models[0].reasons[-1].text == "no way"
