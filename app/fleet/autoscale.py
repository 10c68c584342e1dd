"""`kernelgrader fleet run`: carry the policy's plan out through a scheduler, a pass at a time.

A pass asks the scheduler what became of every job not yet ended, links each job to the worker
that registered from it, cancels jobs whose worker never came or went silent and workers that
drain too long, reads the plan (app.fleet.inputs, app.fleet.policy) and acts on it: submit,
cancel pending jobs, ask idle workers to drain. Scheduler calls happen outside any transaction,
and each is recorded in a transaction of its own right after.

One loop acts per backend: a pass first renews a lease in the database (`fleet_runners`), and a
second loop waits until the first has been silent for three passes. A worker whose job the
scheduler ended (time limit, preemption, node failure, scancel) held at most a few tasks: the
sweeper sends each again once its heartbeat is silent, and the database makes a second
delivery harmless, so nothing is lost or graded twice.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import FrameType
from typing import Protocol

from sqlalchemy import or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.database import session_scope, utcnow
from app.core.fleet_settings import FleetSettings
from app.core.settings import get_settings
from app.fleet import slurm
from app.fleet.inputs import current_plan
from app.fleet.models import BorrowedState, BorrowedWorker, FleetRunner
from app.fleet.policy import Plan, minutes, shown
from app.fleet.slurm import JobStatus, SlurmError
from app.jobs.models import Worker

log = logging.getLogger("kernelgrader.fleet")

# A job Slurm does not list this soon after sbatch answered is not taken as gone yet.
UNLISTED_GRACE_S = 60.0
OPEN = [s.value for s in BorrowedState if s is not BorrowedState.ended]


class Backend(Protocol):
    name: str

    def cannot_place(self, model: str) -> str | None: ...
    def submit(self, model: str) -> str: ...
    def cancel(self, job_id: str) -> None: ...
    def observe(self, job_ids: list[str]) -> dict[str, JobStatus]: ...


class SlurmBackend:
    name = slurm.BACKEND

    def __init__(self, settings: FleetSettings) -> None:
        self.settings = settings

    def cannot_place(self, model: str) -> str | None:
        return slurm.cannot_place(self.settings, model)

    def submit(self, model: str) -> str:
        return slurm.submit(self.settings, model)

    def cancel(self, job_id: str) -> None:
        slurm.cancel(job_id)

    def observe(self, job_ids: list[str]) -> dict[str, JobStatus]:
        return slurm.observe(job_ids)


def backend_for(settings: FleetSettings) -> Backend | None:
    return SlurmBackend(settings) if settings.fleet_backend == "slurm" else None


@dataclass
class PassReport:
    plan: Plan | None = None
    submitted: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    drained: list[str] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.submitted or self.cancelled or self.drained or self.ended)

    def summary(self) -> str:
        done = [
            f"{what} {', '.join(keys)}"
            for what, keys in (
                ("submitted", self.submitted),
                ("cancelled", self.cancelled),
                ("drained", self.drained),
                ("saw end", self.ended),
            )
            if keys
        ]
        text = "; ".join(done) or "nothing to change"
        return text + ("" if not self.errors else f". Errors: {' '.join(self.errors)}")


# --- the lease ---------------------------------------------------------------------------


def take_lease(backend: str, holder: str, *, now: datetime, stale_after_s: float) -> bool:
    """Hold (or renew) the lease of the loop that acts for `backend`."""
    stale = now - timedelta(seconds=stale_after_s)
    with session_scope() as session:
        held = session.execute(
            update(FleetRunner)
            .where(
                FleetRunner.backend == backend,
                or_(FleetRunner.holder == holder, FleetRunner.ticked_at < stale),
            )
            .values(holder=holder, ticked_at=now)
        )
        if held.rowcount == 1:  # type: ignore[attr-defined]
            return True
        if session.scalar(select(FleetRunner.id).where(FleetRunner.backend == backend)):
            return False
    try:
        with session_scope() as session:
            session.add(FleetRunner(backend=backend, holder=holder, started_at=now, ticked_at=now))
    except IntegrityError:  # another loop took it first
        return False
    return True


def note_pass(backend: str, holder: str, note: str) -> None:
    with session_scope() as session:
        session.execute(
            update(FleetRunner)
            .where(FleetRunner.backend == backend, FleetRunner.holder == holder)
            .values(note=note[:2000])
        )


# --- following the scheduler -------------------------------------------------------------


def _ended_sentence(row: BorrowedWorker, status: JobStatus | None, settings: FleetSettings) -> str:
    if status is None:
        return (
            "Slurm no longer lists it: it ended longer ago than Slurm keeps ended jobs "
            "(MinJobAge), and accounting does not know it."
        )
    where = f" on {status.node}" if status.node else ""
    said = f"{status.ended_because()} ({status.state}{where})"
    if row.cancel_at is not None:
        return f"Cancelled by the fleet: {row.end_reason} Slurm: {said}."
    if row.drain_at is not None and status.state == "COMPLETED":
        return f"Drained: {row.end_reason} Its worker finished and exited."
    hint = {
        "CANCELLED": " Not by the fleet: an administrator, or someone's scancel.",
        "FAILED": f" See the job's log ({settings.slurm_output.replace('%j', row.job_id)}).",
        "OUT_OF_MEMORY": " Raise KERNELGRADER_SLURM_MEMORY.",
        "TIMEOUT": " Lengthen KERNELGRADER_SLURM_TIME_LIMIT if the partition allows it.",
    }.get(status.state, "")
    resend = ""
    if row.worker_name:
        timeout = get_settings().heartbeat_timeout_seconds
        resend = (
            f" Any grading its worker held is sent again once its heartbeat has been silent "
            f"for {timeout:g} s."
        )
    return f"{said[0].upper()}{said[1:]}.{hint}{resend}"


def _end(session: Session, row: BorrowedWorker, sentence: str, now: datetime) -> None:
    row.state = BorrowedState.ended.value
    row.ended_at = now
    row.end_reason = sentence
    if row.worker_name:
        # Gone with its job: the pages should not show it alive until its heartbeat times out.
        session.execute(
            update(Worker)
            .where(Worker.name == row.worker_name, Worker.stopped_at.is_(None))
            .values(stopped_at=now)
        )


def _follow(
    session: Session,
    row: BorrowedWorker,
    status: JobStatus | None,
    *,
    now: datetime,
    settings: FleetSettings,
) -> bool:
    """Bring the row up to what the scheduler says; True when the job ended now."""
    if status is None:
        if (now - row.submitted_at).total_seconds() < UNLISTED_GRACE_S:
            return False
        _end(session, row, _ended_sentence(row, None, settings), now)
        return True
    row.scheduler_state = status.state[:40]
    row.scheduler_reason = status.reason[:200]
    if status.node:
        row.node = status.node[:255]
    if status.phase == "ended":
        _end(session, row, _ended_sentence(row, status, settings), now)
        return True
    if status.phase == "running":
        if row.started_at is None:
            row.started_at = now
        if row.state == BorrowedState.pending.value:
            row.state = BorrowedState.starting.value
    return False


def _link_workers(session: Session, backend: str, now: datetime) -> None:
    """Note the worker each job runs, once it registered; adopt a registered worker whose job
    the fleet submitted but never recorded (a loop stopped between sbatch and its record)."""
    rows = {
        row.key: row
        for row in session.scalars(
            select(BorrowedWorker).where(
                BorrowedWorker.backend == backend, BorrowedWorker.state.in_(OPEN)
            )
        )
    }
    workers = session.scalars(
        select(Worker).where(Worker.fleet_job.like(f"{backend}:%")).order_by(Worker.started_at)
    ).all()
    for worker in workers:
        row = rows.get(worker.fleet_job)
        if row is None:
            if worker.stopped_at is not None:
                continue  # its job ended, or will: nothing to adopt
            job_id = worker.fleet_job.split(":", 1)[1]
            known = session.scalar(
                select(BorrowedWorker.id).where(
                    BorrowedWorker.backend == backend, BorrowedWorker.job_id == job_id
                )
            )
            if known is not None:
                continue  # its job ended already
            row = BorrowedWorker(
                backend=backend,
                job_id=job_id,
                gpu_model="",
                state=BorrowedState.starting.value,
                reason="Found running: its worker registered, but the fleet had not recorded "
                "its job (a loop stopped between submitting and recording it).",
                submitted_at=worker.started_at,
                started_at=worker.started_at,
            )
            session.add(row)
            rows[row.key] = row
        if row.worker_name == worker.name:
            continue
        row.worker_name = worker.name
        row.registered_at = worker.started_at
        row.can_run = worker.can_run
        row.worker_note = worker.note
        if row.started_at is None:
            row.started_at = worker.started_at
        if row.state in (BorrowedState.pending.value, BorrowedState.starting.value):
            row.state = BorrowedState.running.value


def _overdue(
    session: Session, backend: str, *, now: datetime, settings: FleetSettings
) -> list[tuple[BorrowedWorker, str]]:
    """Jobs to cancel whatever the plan says, each with why."""
    found = []
    for row in session.scalars(
        select(BorrowedWorker).where(
            BorrowedWorker.backend == backend,
            BorrowedWorker.state.in_(OPEN),
            BorrowedWorker.cancel_at.is_(None),
        )
    ):
        why = _overdue_because(session, row, now=now, settings=settings)
        if why is not None:
            found.append((row, why))
    return found


def _overdue_because(
    session: Session, row: BorrowedWorker, *, now: datetime, settings: FleetSettings
) -> str | None:
    start, drain = settings.fleet_start_seconds, settings.fleet_drain_seconds
    if row.state == BorrowedState.starting.value and row.started_at is not None:
        if (now - row.started_at).total_seconds() >= start:
            return (
                f"its worker did not register within {minutes(start)} of the job starting (see "
                "the job's log)."
            )
    elif row.state == BorrowedState.draining.value and row.drain_at is not None:
        if (now - row.drain_at).total_seconds() >= drain:
            return f"still running {minutes(drain)} after it was asked to drain."
    elif row.state == BorrowedState.running.value and row.worker_name:
        heard = session.scalar(select(Worker.heartbeat_at).where(Worker.name == row.worker_name))
        silent = (now - heard).total_seconds() if heard is not None else 0.0
        if silent >= start:
            return f"its worker has not been heard from for {minutes(silent)}."
    return None


# --- one pass ----------------------------------------------------------------------------


def _reason_text(plan: Plan, model: str) -> str:
    """The plan's reasons as a job's row keeps them: shown to staff of every course, so no
    lab is named."""
    mine = plan.of(model)
    return " ".join(r.for_courses(set()) for r in mine.reasons) if mine else ""


def run_pass(
    backend: Backend, settings: FleetSettings, *, now: datetime | None = None
) -> PassReport:
    """One pass: follow the scheduler, then plan and act."""
    now = now or utcnow()
    report = PassReport()
    with session_scope() as session:
        open_ids = list(
            session.scalars(
                select(BorrowedWorker.job_id).where(
                    BorrowedWorker.backend == backend.name, BorrowedWorker.state.in_(OPEN)
                )
            )
        )
    try:
        statuses = backend.observe(open_ids)
    except SlurmError as exc:
        # Without the scheduler's word nothing is decided: acting on stale states could
        # submit twice.
        report.errors.append(str(exc))
        return report
    with session_scope() as session:
        # Workers first: a job that ended since the last pass may have run a worker that
        # registered meanwhile, and the sentence it ends with says whether its grading is sent
        # again (a worker killed right after taking a job was ended as though it had none).
        _link_workers(session, backend.name, now)
        session.flush()
        observed = set(open_ids)
        for row in session.scalars(
            select(BorrowedWorker).where(
                BorrowedWorker.backend == backend.name, BorrowedWorker.state.in_(OPEN)
            )
        ):
            if row.job_id not in observed:
                continue  # adopted just now, after the scheduler was asked: followed next pass
            if _follow(session, row, statuses.get(row.job_id), now=now, settings=settings):
                report.ended.append(row.key)
        session.flush()
        overdue = [
            (row.job_id, row.key, why)
            for row, why in _overdue(session, backend.name, now=now, settings=settings)
        ]
    for job_id, key, why in overdue:
        _cancel(backend, job_id, key, why, now, report)
    with session_scope() as session:
        plan = current_plan(session, now=now, settings=settings, cannot_place=backend.cannot_place)
    report.plan = plan
    for model_plan in plan.models:
        why = _reason_text(plan, model_plan.model)
        for _ in range(model_plan.submit):
            try:
                job_id = backend.submit(model_plan.model)
            except SlurmError as exc:
                report.errors.append(str(exc))
                break
            with session_scope() as session:
                session.add(
                    BorrowedWorker(
                        backend=backend.name,
                        job_id=job_id,
                        gpu_model=model_plan.model,
                        reason=why,
                        submitted_at=utcnow(),
                    )
                )
            report.submitted.append(f"{backend.name}:{job_id}")
            log.info(
                "submitted %s:%s for %s: %s", backend.name, job_id, shown(model_plan.model), why
            )
        wants = (
            f"the plan wants {model_plan.wanted} for {shown(model_plan.model)}, "
            f"{model_plan.held} held."
        )
        idle = minutes(settings.fleet_idle_seconds)
        for key in model_plan.cancel:
            why_gone = f"pending and not needed: {wants}"
            _cancel(backend, key.split(":", 1)[1], key, why_gone, now, report)
        for key in model_plan.drain:
            _drain(
                backend.name, key.split(":", 1)[1], f"idle {idle} or more, not needed: {wants}", now
            )
            report.drained.append(key)
    return report


def _cancel(
    backend: Backend, job_id: str, key: str, why: str, now: datetime, report: PassReport
) -> None:
    try:
        backend.cancel(job_id)
    except SlurmError as exc:
        report.errors.append(str(exc))
        return
    with session_scope() as session:
        session.execute(
            update(BorrowedWorker)
            .where(BorrowedWorker.backend == backend.name, BorrowedWorker.job_id == job_id)
            .values(cancel_at=now, end_reason=why[:2000])
        )
    report.cancelled.append(key)
    log.info("cancelled %s: %s", key, why)


def _drain(backend: str, job_id: str, why: str, now: datetime) -> None:
    """Ask the job's worker to finish its task and exit (it reads the mark at its next beat)."""
    with session_scope() as session:
        row = session.scalars(
            select(BorrowedWorker).where(
                BorrowedWorker.backend == backend, BorrowedWorker.job_id == job_id
            )
        ).one()
        row.state = BorrowedState.draining.value
        row.drain_at = now
        row.end_reason = why[:2000]
        session.execute(update(Worker).where(Worker.name == row.worker_name).values(drain_at=now))
    log.info("draining %s:%s (worker %s): %s", backend, job_id, row.worker_name, why)


# --- the loop ----------------------------------------------------------------------------


class FleetLoop:
    def __init__(self, backend: Backend, settings: FleetSettings) -> None:
        self.backend = backend
        self.settings = settings
        self.holder = f"{socket.gethostname()}:{os.getpid()}"
        self.stopping = threading.Event()

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        log.info("stopping the fleet loop (%s); borrowed workers keep running", signum)
        self.stopping.set()

    def once(self) -> PassReport | None:
        """One pass if this loop holds the lease; None when another loop acts."""
        now = utcnow()
        stale = max(3 * self.settings.fleet_tick_seconds, 60.0)
        if not take_lease(self.backend.name, self.holder, now=now, stale_after_s=stale):
            return None
        report = run_pass(self.backend, self.settings, now=now)
        note_pass(self.backend.name, self.holder, report.summary())
        for error in report.errors:
            log.warning("%s", error)
        return report

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)
        log.info(
            "fleet loop %s for %s, a pass every %g s",
            self.holder,
            self.backend.name,
            self.settings.fleet_tick_seconds,
        )
        waiting = False
        while not self.stopping.is_set():
            try:
                report = self.once()
            except Exception:  # a database away, say: the next pass tries again
                log.exception("the fleet's pass failed; trying again at the next")
                report = None
            else:
                if report is None and not waiting:
                    log.info("another fleet loop holds the lease; waiting until it goes silent")
                waiting = report is None
                if report is not None and report.changed:
                    log.info("%s", report.summary())
            self.stopping.wait(self.settings.fleet_tick_seconds)
        return 0
