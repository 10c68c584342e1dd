"""The fleet's plan and state as staff read them (/admin/fleet, `kernelgrader fleet status`):
what the policy wants per GPU model and why, each borrowed worker's job and what the scheduler
says of it, and the loop that carries the plan out."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.fleet_settings import FleetSettings, fleet_settings
from app.fleet.inputs import current_plan
from app.fleet.models import BorrowedState, BorrowedWorker, FleetRunner
from app.fleet.policy import Plan, minutes
from app.fleet.slurm import cannot_place
from app.jobs.models import Worker

ENDED_SHOWN_FOR = timedelta(hours=24)


@dataclass
class BorrowedView:
    key: str
    model: str
    state: str
    scheduler_state: str
    scheduler_reason: str
    node: str
    worker: str
    can_run: bool | None
    worker_note: str
    idle_seconds: float | None
    submitted_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    reason: str  # why it was submitted
    end_reason: str  # why it drains, was cancelled or ended


@dataclass
class RunnerView:
    holder: str
    ticked_at: datetime
    seconds_since: float
    alive: bool
    note: str


@dataclass
class FleetView:
    now: datetime
    settings: FleetSettings
    plan: Plan
    borrowed: list[BorrowedView]  # not ended, oldest first
    ended: list[BorrowedView]  # ended in the last day, newest first
    runner: RunnerView | None

    @property
    def backend(self) -> str:
        return self.settings.fleet_backend


def _view(row: BorrowedWorker, workers: dict[str, Worker], now: datetime) -> BorrowedView:
    idle = None
    worker = workers.get(row.worker_name) if row.worker_name else None
    if worker is not None and row.state != BorrowedState.ended.value:
        busy = worker.busy_at or worker.started_at
        idle = max(0.0, (now - busy).total_seconds())
    return BorrowedView(
        key=row.key,
        model=row.gpu_model,
        state=row.state,
        scheduler_state=row.scheduler_state,
        scheduler_reason=row.scheduler_reason,
        node=row.node,
        worker=row.worker_name,
        can_run=row.can_run,
        worker_note=row.worker_note,
        idle_seconds=idle,
        submitted_at=row.submitted_at,
        started_at=row.started_at,
        ended_at=row.ended_at,
        reason=row.reason,
        end_reason=row.end_reason,
    )


def fleet_view(
    session: Session, *, now: datetime | None = None, settings: FleetSettings | None = None
) -> FleetView:
    now = now or utcnow()
    settings = settings or fleet_settings()
    backend = settings.fleet_backend
    placeable = (lambda model: cannot_place(settings, model)) if backend == "slurm" else None
    plan = current_plan(session, now=now, settings=settings, cannot_place=placeable)
    rows = list(
        session.scalars(
            select(BorrowedWorker)
            .where(
                BorrowedWorker.backend == backend,
                (BorrowedWorker.state != BorrowedState.ended.value)
                | (BorrowedWorker.ended_at >= now - ENDED_SHOWN_FOR),
            )
            .order_by(BorrowedWorker.submitted_at, BorrowedWorker.id)
        )
    )
    names = [row.worker_name for row in rows if row.worker_name]
    workers = {w.name: w for w in session.scalars(select(Worker).where(Worker.name.in_(names)))}
    views = [_view(row, workers, now) for row in rows]
    runner = None
    held = session.scalars(select(FleetRunner).where(FleetRunner.backend == backend)).first()
    if held is not None and backend:
        since = max(0.0, (now - held.ticked_at).total_seconds())
        runner = RunnerView(
            holder=held.holder,
            ticked_at=held.ticked_at,
            seconds_since=since,
            alive=since <= max(3 * settings.fleet_tick_seconds, 60.0),
            note=held.note,
        )
    return FleetView(
        now=now,
        settings=settings,
        plan=plan,
        borrowed=[v for v in views if v.state != BorrowedState.ended.value],
        ended=sorted(
            (v for v in views if v.state == BorrowedState.ended.value),
            key=lambda v: v.ended_at or now,
            reverse=True,
        ),
        runner=runner,
    )


def settings_sentence(settings: FleetSettings) -> str:
    return (
        f"floor {settings.fleet_floor} and ceiling {settings.fleet_ceiling} borrowed workers per "
        f"GPU model, one worker per {settings.fleet_jobs_per_worker} jobs, scaling up "
        f"{minutes(settings.fleet_lead_seconds)} before a due date, draining a worker idle for "
        f"{minutes(settings.fleet_idle_seconds)}"
    )


def loop_sentence(view: FleetView) -> str:
    """Whether the plan is being carried out, in a sentence."""
    if not view.backend:
        return (
            "No scheduler is set (KERNELGRADER_FLEET_BACKEND): this is the plan the policy "
            "would carry out; nothing is borrowed."
        )
    runner = view.runner
    if runner is None or not runner.alive:
        heard = ""
        if runner is not None:
            heard = f" (the last, {runner.holder}, {minutes(runner.seconds_since)} ago)"
        return (
            f"No `kernelgrader fleet run` loop has acted lately{heard}: the plan below is not "
            "carried out. Start one on a host that can submit Slurm jobs."
        )
    return (
        f"The loop {runner.holder} carries the plan out through {view.backend}; its latest pass, "
        f"{minutes(runner.seconds_since)} ago: {runner.note or 'nothing to change'}."
    )
