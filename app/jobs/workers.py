"""The worker registry: every worker process says who it is and what it can do (compile, run
on which GPU model), and beats while it lives; what waits is told in a sentence when none could
take it. Its rows are the `workers` table (app.jobs.models); /admin/system and the fleet read them.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from app.core.database import session_scope, utcnow
from app.core.fleet_settings import FleetSettingsInvalid, fleet_settings
from app.core.settings import get_settings
from app.jobs.models import Worker
from app.jobs.routing import serves


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# What a student reads when no grader can take their submission now; what staff read beside
# it (set_status's staff_note) says which worker to start and where to look.
NO_COMPILER_FOR_STUDENTS = (
    "The grader is not running at the moment, so your submission waits in the queue; nothing "
    "is lost, and it is graded as soon as the grader is back."
)
NO_COMPILER = (
    "No grading worker has been heard from in the last {seconds:.0f} s: start one with "
    "`kernelgrader worker` (or `kernelgrader serve`, which starts one beside the web server); "
    "the workers are listed at /admin/system."
)
# Where the fleet borrows workers from a scheduler (app.fleet.autoscale), none may be running
# between rushes: not a fault, the first uploads wait for one to start.
BORROWED_FOR_STUDENTS = (
    "Graders start when there is work to do, so it waits a few minutes for one; nothing is "
    "lost, and it is graded as soon as one is up."
)
BORROWED = (
    "No grading worker has been heard from in the last {seconds:.0f} s; the fleet borrows them "
    "from {backend} as the queue grows (`kernelgrader fleet run`; its plan and jobs are on "
    "/admin/fleet)."
)
NO_RUNNER = (
    "No worker that can run it{model} has been heard from in the last {seconds:.0f} s: start "
    "one with `kernelgrader worker --gpus all` on a GPU host; the workers are listed at "
    "/admin/system."
)


def alive_after(now: datetime) -> datetime:
    return now - timedelta(seconds=get_settings().heartbeat_timeout_seconds)


# --- the worker's side -------------------------------------------------------------------


def register_worker(
    *,
    name: str,
    host: str,
    pid: int,
    gpu: str,
    gpu_model: str,
    arch: str,
    can_compile: bool,
    can_run: bool,
    note: str,
    queues: list[str],
    version: str,
    fleet_job: str = "",
) -> None:
    """Say who this worker is and what it can do; a name seen before (a reused pid) restarts.

    `fleet_job`: the scheduler's job it runs in ("slurm:1234"), where the fleet borrowed it."""
    now = utcnow()
    with session_scope() as session:
        session.execute(delete(Worker).where(Worker.name == name))
        session.add(
            Worker(
                name=name,
                host=host,
                pid=pid,
                gpu=gpu,
                gpu_model=gpu_model,
                arch=arch,
                can_compile=can_compile,
                can_run=can_run,
                note=note,
                queues=queues,
                version=version,
                started_at=now,
                heartbeat_at=now,
                fleet_job=fleet_job,
            )
        )


@dataclass(frozen=True)
class BeatAnswer:
    drain: bool  # asked to finish its task, take no new one, and exit (app.fleet.autoscale)


def beat(name: str, *, busy_at: datetime | None = None) -> BeatAnswer | None:
    """Mark the worker alive now (and busy at `busy_at`, when it last held a task); None when
    its row is gone (then it registers again)."""
    values: dict[str, Any] = {"heartbeat_at": utcnow(), "stopped_at": None}
    if busy_at is not None:
        values["busy_at"] = busy_at
    with session_scope() as session:
        done = session.execute(update(Worker).where(Worker.name == name).values(**values))
        if done.rowcount != 1:  # type: ignore[attr-defined]
            return None
        drain_at = session.scalar(select(Worker.drain_at).where(Worker.name == name))
        return BeatAnswer(drain=drain_at is not None)


def mark_stopped(name: str) -> None:
    with session_scope() as session:
        session.execute(update(Worker).where(Worker.name == name).values(stopped_at=utcnow()))


def note_timing(
    session: Session, *, name: str, temperature_c: int | None, sm_clock_mhz: int | None
) -> None:
    """Keep the GPU's temperature and SM clock from the run stage's latest timed section."""
    session.execute(
        update(Worker)
        .where(Worker.name == name)
        .values(
            timing_temperature_c=temperature_c,
            timing_sm_clock_mhz=sm_clock_mhz,
            timed_at=utcnow(),
        )
    )


# --- who can take a job ------------------------------------------------------------------


def live_workers(session: Session, *, now: datetime | None = None) -> list[Worker]:
    now = now or utcnow()
    return list(
        session.scalars(
            select(Worker).where(
                Worker.stopped_at.is_(None), Worker.heartbeat_at >= alive_after(now)
            )
        )
    )


def queued_message(
    session: Session, message: str, *, now: datetime | None = None
) -> tuple[str, str]:
    """A queued submission's status message and staff note: when no live worker could take
    it, a sentence for the student and one for the staff that says what to start."""
    if any(w.can_compile for w in live_workers(session, now=now)):
        return message, ""
    seconds = get_settings().heartbeat_timeout_seconds
    try:
        backend = fleet_settings().fleet_backend
    except FleetSettingsInvalid:  # said on /admin/fleet; the usual sentence here
        backend = ""
    if backend:
        return f"{message} {BORROWED_FOR_STUDENTS}", BORROWED.format(
            seconds=seconds, backend=backend.capitalize()
        )
    return f"{message} {NO_COMPILER_FOR_STUDENTS}", NO_COMPILER.format(seconds=seconds)


def no_runner_note(session: Session, *, required_key: str, model: str) -> str:
    """ "" when a live worker can run a job needing this GPU model; else a sentence for staff."""
    for worker in live_workers(session):
        if worker.can_run and serves(worker.gpu_model, required_key):
            return ""
    shown = f" on {model} GPUs" if model else ""
    return NO_RUNNER.format(model=shown, seconds=get_settings().heartbeat_timeout_seconds)
