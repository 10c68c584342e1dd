"""The worker registry and the queue as staff see them: who is alive, what each can do and
holds, what waits, and what failed on our side."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from app.core.database import session_scope, utcnow
from app.core.settings import get_settings
from app.courses.models import Course, Lab
from app.fleet.models import Worker
from app.fleet.settings import FleetSettingsInvalid, fleet_settings
from app.jobs.routing import serves
from app.submissions.models import GradingJob, JobState, Submission

# Workers silent longer than this drop off the lists; their rows stay for the jobs' history.
SHOWN_FOR = timedelta(hours=24)
# Set by submissions/service.regrade on the job a regrade replaces: not a failure.
REPLACED_BY_REGRADE = "replaced by a regrade"

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


def _alive_after(now: datetime) -> datetime:
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


def note_timing(session: Session, *, name: str, gpu: dict[str, Any] | None) -> None:
    """Keep the GPU's temperature and SM clock from the run stage's latest timed section."""
    if not gpu:
        return
    session.execute(
        update(Worker)
        .where(Worker.name == name)
        .values(
            timing_temperature_c=gpu.get("temperature_c"),
            timing_sm_clock_mhz=gpu.get("sm_clock_mhz"),
            timed_at=utcnow(),
        )
    )


# --- who can take a job ------------------------------------------------------------------


def live_workers(session: Session, *, now: datetime | None = None) -> list[Worker]:
    now = now or utcnow()
    return list(
        session.scalars(
            select(Worker).where(
                Worker.stopped_at.is_(None), Worker.heartbeat_at >= _alive_after(now)
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
    alive_after = _alive_after(now)
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
            alive=row.stopped_at is None and row.heartbeat_at >= alive_after,
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
