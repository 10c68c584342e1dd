"""The policy's inputs read from the database: the queue per GPU model, the borrowed workers,
the labs' due dates with last term's upload curves, and the workers nobody borrowed."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.errors import DomainError
from app.core.fleet_settings import FleetSettings
from app.courses.models import Course, Enrollment, Lab, Role
from app.courses.specs import required_gpu_model, spec_for
from app.fleet.models import BorrowedState, BorrowedWorker
from app.fleet.policy import (
    Borrowed,
    Deadline,
    Demand,
    NoGpu,
    Phase,
    Plan,
    PolicySettings,
    UploadCurve,
    plan_fleet,
)
from app.jobs.routing import model_key, serves
from app.jobs.workers import live_workers
from app.submissions.models import GradingJob, JobState, Submission

# Last term's curve in this many bins over the lead time (10 min bins for a 2 h lead).
CURVE_BINS = 12


def policy_settings(settings: FleetSettings) -> PolicySettings:
    return PolicySettings(
        floor=settings.fleet_floor,
        ceiling=settings.fleet_ceiling,
        jobs_per_worker=settings.fleet_jobs_per_worker,
        lead_seconds=settings.fleet_lead_seconds,
        idle_seconds=settings.fleet_idle_seconds,
        rush_workers=settings.fleet_rush_workers,
        grading_seconds=settings.fleet_grading_seconds,
        no_gpu_retry_seconds=settings.fleet_no_gpu_retry_seconds,
    )


class LabModels:
    """The GPU model (routing key) each lab's jobs need, its spec read once per lab."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.known: dict[int, str] = {}

    def of(self, lab_id: int) -> str:
        if lab_id not in self.known:
            lab = self.session.get_one(Lab, lab_id)
            try:
                model = required_gpu_model(lab, spec_for(lab))
            except DomainError:  # the lab's folder is gone: the course's setting alone
                model = lab.gpu_model
            self.known[lab_id] = model_key(model)
        return self.known[lab_id]


def read_demand(session: Session, models: LabModels) -> dict[str, Demand]:
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for state, compiled, lab_id, n in session.execute(
        select(
            GradingJob.state,
            GradingJob.compiled_at.is_not(None),
            Submission.lab_id,
            func.count(),
        )
        .join(Submission, Submission.id == GradingJob.submission_id)
        .where(
            GradingJob.state.in_(
                [JobState.queued.value, JobState.waiting_gpu.value, JobState.started.value]
            )
        )
        .group_by(GradingJob.state, GradingJob.compiled_at.is_not(None), Submission.lab_id)
    ):
        if state == JobState.started.value:
            kind = "in_progress"
        elif state == JobState.waiting_gpu.value or compiled:
            kind = "to_run"
        else:
            kind = "to_compile"
        counts[models.of(lab_id)][kind] += n
    return {model: Demand(**c) for model, c in counts.items()}


def read_borrowed(session: Session, *, now: datetime, backend: str) -> list[Borrowed]:
    alive = {w.name: w for w in live_workers(session, now=now)}
    found = []
    for row in session.scalars(
        select(BorrowedWorker).where(
            BorrowedWorker.backend == backend, BorrowedWorker.state != BorrowedState.ended.value
        )
    ):
        idle = None
        worker = alive.get(row.worker_name) if row.worker_name else None
        if worker is not None:
            busy = worker.busy_at or worker.started_at
            idle = max(0.0, (now - busy).total_seconds())
        found.append(
            Borrowed(
                key=row.key,
                model=row.gpu_model,
                phase=Phase(row.state),
                submitted_at=row.submitted_at,
                idle_seconds=idle,
            )
        )
    return found


def read_no_gpu(session: Session, *, backend: str) -> dict[str, NoGpu]:
    """Per model, the latest borrowed worker to register, where it could not run kernels."""
    latest: dict[str, BorrowedWorker] = {}
    for row in session.scalars(
        select(BorrowedWorker)
        .where(BorrowedWorker.backend == backend, BorrowedWorker.registered_at.is_not(None))
        .order_by(BorrowedWorker.registered_at, BorrowedWorker.id)
    ):
        latest[row.gpu_model] = row
    return {
        model: NoGpu(at=row.registered_at, note=row.worker_note or "no usable GPU")
        for model, row in latest.items()
        if row.can_run is False and row.registered_at is not None
    }


def read_fixed(session: Session, *, now: datetime, models: set[str]) -> dict[str, int]:
    """Live workers nobody borrowed that can run each model's jobs."""
    fixed = [w for w in live_workers(session, now=now) if w.can_run and not w.fleet_job]
    return {m: n for m in models if (n := sum(1 for w in fixed if serves(w.gpu_model, m)))}


def _students(session: Session, course_id: int) -> int:
    return int(
        session.scalar(
            select(func.count()).where(
                Enrollment.course_id == course_id, Enrollment.role == Role.student.value
            )
        )
        or 0
    )


def _curve(session: Session, lab: Lab, *, now: datetime, lead_seconds: float) -> UploadCurve | None:
    """The same lab's uploads before its due date in the latest course whose due date for it
    has passed ("last term"; this lab's own is still to come), over the lead time."""
    if lead_seconds <= 0:
        return None
    earlier = session.scalars(
        select(Lab)
        .where(
            Lab.slug == lab.slug,
            Lab.due_at.is_not(None),
            Lab.due_at < now,
        )
        .order_by(Lab.due_at.desc(), Lab.id.desc())
        .limit(1)
    ).first()
    if earlier is None or earlier.due_at is None:
        return None
    due = earlier.due_at
    bin_seconds = lead_seconds / CURVE_BINS
    counts = [0] * CURVE_BINS
    for (created,) in session.execute(
        select(Submission.created_at).where(
            Submission.lab_id == earlier.id,
            Submission.created_at >= due - timedelta(seconds=lead_seconds),
            Submission.created_at < due,
        )
    ):
        index = int((due - created).total_seconds() // bin_seconds)
        counts[min(index, CURVE_BINS - 1)] += 1
    mean = session.scalar(
        select(
            func.avg(
                func.coalesce(GradingJob.compile_seconds, 0.0)
                + func.coalesce(GradingJob.run_seconds, 0.0)
            )
        )
        .join(Submission, Submission.id == GradingJob.submission_id)
        .where(
            Submission.lab_id == earlier.id,
            GradingJob.state == JobState.done.value,
            GradingJob.compile_seconds.is_not(None),
        )
    )
    return UploadCurve(
        students=_students(session, earlier.course_id),
        bin_seconds=bin_seconds,
        counts=tuple(counts),
        grading_seconds=float(mean) if mean else None,
    )


def read_deadlines(
    session: Session, models: LabModels, *, now: datetime, lead_seconds: float
) -> list[Deadline]:
    """Every lab due in the future; those due within the lead time with last term's curve."""
    found = []
    for lab, course in session.execute(
        select(Lab, Course)
        .join(Course, Course.id == Lab.course_id)
        .where(Lab.due_at.is_not(None), Lab.due_at > now, Lab.archived_at.is_(None))
        .order_by(Lab.due_at, Lab.id)
    ):
        assert lab.due_at is not None
        due = lab.due_at
        soon = (due - now).total_seconds() <= lead_seconds
        found.append(
            Deadline(
                course_id=course.id,
                label=f"{course.slug}/{lab.slug}",
                model=models.of(lab.id),
                due_at=due,
                students=_students(session, course.id) if soon else 0,
                curve=_curve(session, lab, now=now, lead_seconds=lead_seconds) if soon else None,
            )
        )
    return found


def current_plan(
    session: Session,
    *,
    now: datetime,
    settings: FleetSettings,
    cannot_place: Callable[[str], str | None] | None = None,
) -> Plan:
    """The policy's plan for the fleet as the database shows it now."""
    backend = settings.fleet_backend
    models = LabModels(session)
    demand = read_demand(session, models)
    borrowed = read_borrowed(session, now=now, backend=backend) if backend else []
    deadlines = read_deadlines(session, models, now=now, lead_seconds=settings.fleet_lead_seconds)
    in_use = set(demand) | {b.model for b in borrowed} | {d.model for d in deadlines}
    problems = {m: p for m in in_use if cannot_place and (p := cannot_place(m))}
    return plan_fleet(
        now=now,
        demand=demand,
        borrowed=borrowed,
        deadlines=deadlines,
        settings=policy_settings(settings),
        fixed=read_fixed(session, now=now, models=in_use),
        no_gpu=read_no_gpu(session, backend=backend) if backend else {},
        cannot_borrow=problems,
    )
