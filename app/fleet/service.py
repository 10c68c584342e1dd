"""The workers (app.jobs.workers' registry) and the queue as staff see them: who is alive, what
each can do and holds, what waits, and what failed on our side."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.settings import get_settings
from app.courses.models import Course, Lab
from app.jobs.models import Worker
from app.jobs.workers import alive_after
from app.submissions.models import GradingJob, JobState, Submission

# Workers silent longer than this drop off the lists; their rows stay for the jobs' history.
SHOWN_FOR = timedelta(hours=24)
# Set by submissions/service.regrade on the job a regrade replaces: not a failure.
REPLACED_BY_REGRADE = "replaced by a regrade"

# --- what staff see ----------------------------------------------------------------------


@dataclass
class HeldJob:
    job_id: int
    submission_id: int
    course: str
    lab: str
    started_at: datetime | None
    visible: bool  # the viewer is staff of its course


@dataclass
class WorkerView:
    id: int
    name: str
    host: str
    pid: int
    gpu: str
    gpu_model: str
    arch: str
    can_compile: bool
    can_run: bool
    note: str
    queues: list[str]
    version: str
    started_at: datetime
    heartbeat_at: datetime
    stopped_at: datetime | None
    alive: bool
    seconds_since_heard: float
    timing_temperature_c: int | None
    timing_sm_clock_mhz: int | None
    timed_at: datetime | None
    job: HeldJob | None = None

    @property
    def can(self) -> str:
        return ", ".join(
            n for n, ok in (("compile", self.can_compile), ("run", self.can_run)) if ok
        )

    @property
    def state(self) -> str:
        if self.stopped_at is not None:
            return "stopped"
        return "alive" if self.alive else "silent"


@dataclass
class JobView:
    job_id: int
    submission_id: int
    course: str
    lab: str
    state: str
    gpu_model: str
    worker: str
    queued_at: datetime
    attempt: int


@dataclass
class ErrorView:
    job_id: int
    submission_id: int
    course: str
    lab: str
    worker: str
    error: str
    at: datetime | None


@dataclass
class QueueView:
    queued: int = 0
    started: int = 0
    waiting_gpu: int = 0
    # Compiled jobs waiting for a GPU, by the model they need ("" : any GPU).
    waiting_by_model: dict[str, int] = field(default_factory=dict)
    oldest_queued_at: datetime | None = None
    oldest_submission_id: int | None = None

    @property
    def waiting(self) -> int:
        return self.queued + self.waiting_gpu


@dataclass
class FleetSnapshot:
    now: datetime
    workers: list[WorkerView]
    queue: QueueView
    jobs: list[JobView]  # waiting or being graded, oldest first (the viewer's courses)
    errors: list[ErrorView]  # latest failures on our side (the viewer's courses)

    @property
    def alive(self) -> list[WorkerView]:
        return [w for w in self.workers if w.alive]


def recent_workers(session: Session, *, now: datetime | None = None) -> list[WorkerView]:
    """Every worker heard from in the last day, alive, silent or stopped, by host and GPU."""
    now = now or utcnow()
    alive_since = alive_after(now)
    rows = session.scalars(
        select(Worker)
        .where(Worker.heartbeat_at >= now - SHOWN_FOR)
        .order_by(Worker.host, Worker.gpu, Worker.name)
    ).all()
    return [
        WorkerView(
            id=row.id,
            name=row.name,
            host=row.host,
            pid=row.pid,
            gpu=row.gpu,
            gpu_model=row.gpu_model,
            arch=row.arch,
            can_compile=row.can_compile,
            can_run=row.can_run,
            note=row.note,
            queues=list(row.queues or []),
            version=row.version,
            started_at=row.started_at,
            heartbeat_at=row.heartbeat_at,
            stopped_at=row.stopped_at,
            alive=row.stopped_at is None and row.heartbeat_at >= alive_since,
            seconds_since_heard=max(0.0, (now - row.heartbeat_at).total_seconds()),
            timing_temperature_c=row.timing_temperature_c,
            timing_sm_clock_mhz=row.timing_sm_clock_mhz,
            timed_at=row.timed_at,
        )
        for row in rows
    ]


def grading_sentence(workers: list[WorkerView]) -> str:
    """ "ok" when live workers can compile and run; else what waits, and why, in a sentence."""
    seconds = get_settings().heartbeat_timeout_seconds
    alive = [w for w in workers if w.alive]
    if not any(w.can_compile for w in alive):
        return (
            f"No worker that can compile has been heard from in the last {seconds:.0f} s: "
            "submissions wait in the queue until one starts."
        )
    if not any(w.can_run for w in alive):
        return (
            f"No worker with a GPU has been heard from in the last {seconds:.0f} s: "
            "submissions compile, then wait for a GPU worker to run them."
        )
    return "ok"


def _job_rows(session: Session, query: Any) -> list[Any]:
    return list(
        session.execute(
            query.join(Submission, Submission.id == GradingJob.submission_id)
            .join(Lab, Lab.id == Submission.lab_id)
            .join(Course, Course.id == Lab.course_id)
        )
    )


def fleet_snapshot(
    session: Session,
    *,
    now: datetime | None = None,
    course_ids: set[int] | None = None,
    limit: int = 50,
) -> FleetSnapshot:
    """Workers heard from in the last day, the queue's totals, and the jobs and errors of the
    given courses (every course when None)."""
    now = now or utcnow()
    views = {view.name: view for view in recent_workers(session, now=now)}
    columns = (GradingJob, Submission.id, Course.id, Course.slug, Lab.slug)
    for job, sid, course_id, course, lab in _job_rows(
        session,
        select(*columns).where(
            GradingJob.state == JobState.started.value, GradingJob.worker_id.in_(list(views))
        ),
    ):
        visible = course_ids is None or course_id in course_ids
        views[job.worker_id].job = HeldJob(
            job_id=job.id,
            submission_id=sid,
            course=course if visible else "",
            lab=lab if visible else "",
            started_at=job.started_at,
            visible=visible,
        )

    queue = QueueView()
    waiting_states = (JobState.queued.value, JobState.waiting_gpu.value)
    for state, model, count in session.execute(
        select(GradingJob.state, GradingJob.gpu_model, func.count())
        .where(GradingJob.state.in_([*waiting_states, JobState.started.value]))
        .group_by(GradingJob.state, GradingJob.gpu_model)
    ):
        if state == JobState.queued.value:
            queue.queued += count
        elif state == JobState.started.value:
            queue.started += count
        else:
            queue.waiting_gpu += count
            queue.waiting_by_model[model] = queue.waiting_by_model.get(model, 0) + count
    oldest = session.execute(
        select(GradingJob.queued_at, GradingJob.submission_id)
        .where(GradingJob.state.in_(waiting_states))
        .order_by(GradingJob.queued_at, GradingJob.id)
        .limit(1)
    ).first()
    if oldest is not None:
        queue.oldest_queued_at, queue.oldest_submission_id = oldest

    def of_courses(query: Any) -> Any:
        return query if course_ids is None else query.where(Course.id.in_(course_ids))

    jobs = [
        JobView(
            job_id=job.id,
            submission_id=sid,
            course=course,
            lab=lab,
            state=job.state,
            gpu_model=job.gpu_model,
            worker=job.worker_id or "",
            queued_at=job.queued_at,
            attempt=job.attempt,
        )
        for job, sid, _cid, course, lab in _job_rows(
            session,
            of_courses(
                select(*columns)
                .where(GradingJob.state.in_([*waiting_states, JobState.started.value]))
                .order_by(GradingJob.queued_at, GradingJob.id)
                .limit(limit)
            ),
        )
    ]
    errors = [
        ErrorView(
            job_id=job.id,
            submission_id=sid,
            course=course,
            lab=lab,
            worker=job.worker_id or "",
            error=job.error,
            at=job.finished_at,
        )
        for job, sid, _cid, course, lab in _job_rows(
            session,
            of_courses(
                select(*columns)
                .where(
                    GradingJob.state == JobState.failed.value,
                    GradingJob.error != "",
                    GradingJob.error != REPLACED_BY_REGRADE,
                )
                .order_by(GradingJob.finished_at.desc(), GradingJob.id.desc())
                .limit(20)
            ),
        )
    ]
    return FleetSnapshot(
        now=now, workers=list(views.values()), queue=queue, jobs=jobs, errors=errors
    )


def describe_age(seconds: float) -> str:
    """'45 s', '3 min 10 s', '2 h 5 min', '3 d 4 h': an age for people."""
    whole = int(max(0.0, seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    if whole < 86400:
        return f"{whole // 3600} h {whole % 3600 // 60} min"
    return f"{whole // 86400} d {whole % 86400 // 3600} h"
