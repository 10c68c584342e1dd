"""The worker's side of one job: claim it, compile, run where a GPU is, record.

Each phase opens its own short transaction, so the web process sees progress and a worker that
dies leaves a job that the sweeper can recognise by its stale heartbeat.
"""

from __future__ import annotations

import enum
import logging
import threading
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import session_scope, utcnow
from app.core.overload import database_unavailable
from app.core.settings import Settings, get_settings
from app.courses.models import Lab
from app.courses.specs import required_gpu_model, spec_for
from app.grading import programs
from app.grading.flows import after_grading
from app.grading.record import (
    NOT_YOUR_FAULT,
    record_compile,
    record_progress,
    record_report,
)
from app.grading.reference_cache import keep_timings, kept_timings
from app.jobs.celery_app import QUEUE
from app.jobs.gpu_probe import run_unavailable_reason, worker_arch, worker_gpu, worker_gpu_model
from app.jobs.routing import model_key, serves
from app.jobs.workers import no_runner_note, note_timing, worker_id
from app.submissions.models import GRADING, GradingJob, JobState, Priority, Status, Submission
from app.submissions.service import compile_name, queue_grading, set_status

if TYPE_CHECKING:
    from graders.results import CompileResult, GradeReport
    from graders.spec import LabSpec

log = logging.getLogger(__name__)


# A compiled submission waiting for a GPU, as its student reads it; why this worker could not
# run it (a driver error, a switched-off GPU, another GPU model) goes to the staff's note.
WAITS_FOR_GPU = (
    "Running it waits for a GPU worker: the test cases run, and the score comes, as soon as one "
    "is free."
)


class Outcome(enum.StrEnum):
    missing = "missing"  # no such job, or it belongs to another submission
    duplicate = "duplicate"  # already finished, or held by a live worker
    compile_error = "compile_error"
    compiled = "compiled"  # waiting for a GPU worker
    graded = "graded"
    lost = "lost"  # another worker took the job over while this one worked
    error = "error"


Taken = tuple[datetime | None, str | None]


# Jobs this process is running now: a second delivery of one of them must not be taken
# back as "this worker's own job" while the first still runs (a worker may run several jobs).
_running: set[int] = set()
_running_lock = threading.Lock()


def _claim(submission_id: int, job_id: int, me: str, taken: Taken = (None, None)) -> bool:
    """Take the job if it is queued, or held by a worker whose heartbeat went stale.

    `taken`: the send stamp and queue of the message this worker took, noted for the sweeper.
    """
    settings = get_settings()
    with _running_lock:
        if job_id in _running:
            return False
        _running.add(job_id)
    claimed = False
    try:
        claimed = _claim_row(submission_id, job_id, me, taken, settings=settings)
    finally:
        if not claimed:
            with _running_lock:
                _running.discard(job_id)
    return claimed


def _release(job_id: int) -> None:
    with _running_lock:
        _running.discard(job_id)


def held_here(job_id: int) -> bool:
    """Whether a thread of this process is grading the job now."""
    with _running_lock:
        return job_id in _running


def _claim_row(
    submission_id: int, job_id: int, me: str, taken: Taken, *, settings: Settings
) -> bool:
    now = utcnow()
    with session_scope() as session:
        # Queued; or a second delivery after its worker died (once the attempts are spent the
        # sweeper fails it with a sentence instead); or this worker's own job, tried again
        # after the database was away, and not running in this process any more (checked by
        # the caller).
        claimed = GRADING.claim(
            session,
            job_id,
            now=now,
            me=me,
            stale_before=now - timedelta(seconds=settings.heartbeat_timeout_seconds),
            max_attempts=settings.max_attempts,
            retake_own=True,
            where=[GradingJob.submission_id == submission_id],
            values={"taken_sent_at": taken[0], "taken_queue": taken[1]},
        )
        if not claimed:
            return False
        submission = session.get_one(Submission, submission_id)
        set_status(session, submission, Status.compiling, "A worker is compiling it.")
    return True


def grade_job(
    submission_id: int, job_id: int, *, me: str | None = None, taken: Taken = (None, None)
) -> Outcome:
    """Grade one job; running it twice, or after another worker, still gives one result set."""
    me = me or worker_id()
    settings = get_settings()
    if not _claim(submission_id, job_id, me, taken):
        with session_scope() as session:
            exists = session.get(GradingJob, job_id)
            return Outcome.missing if exists is None else Outcome.duplicate
    try:
        return _grade_held(submission_id, job_id, me, settings)
    finally:
        _release(job_id)


def _grade_held(submission_id: int, job_id: int, me: str, settings: Settings) -> Outcome:
    with GRADING.heartbeat(
        job_id, me, every_seconds=settings.heartbeat_seconds, name=f"heartbeat-{job_id}"
    ):
        try:
            from graders.compile.compiler import compile_submission

            with session_scope() as session:
                submission = session.get_one(Submission, submission_id)
                lab = session.get_one(Lab, submission.lab_id)
                source, filename = submission.source_text, submission.filename
            spec = spec_for(lab)
            model = required_gpu_model(lab, spec)
            arch, name = worker_arch(), compile_name(filename)
            how = programs.recipe(arch=arch, digest=spec.digest, filename=name)
            with session_scope() as session:
                compiled = programs.kept(session, job_id=job_id, recipe=how)
            if compiled is None:
                # Line info leaves the machine code as it is and lets the sanitizer name lines.
                compiled = compile_submission(
                    spec, source, arch=arch, filename=name, line_info=True
                )
            else:
                log.info("job %s: running the program compiled when it was taken before", job_id)
            reason = _cannot_run_here(model) if compiled.ok else None
            with session_scope() as session:
                if not GRADING.hold(session, job_id, me):
                    return Outcome.lost
                job = session.get_one(GradingJob, job_id)
                job.lab_digest = spec.digest  # the version of the lab this job is graded against
                submission = session.get_one(Submission, submission_id)
                record_compile(session, submission=submission, job=job, result=compiled)
                if not compiled.ok:
                    internal = compiled.reason == "internal"
                    return Outcome.error if internal else Outcome.compile_error
                if reason is not None:
                    job.state = JobState.waiting_gpu.value
                    job.gpu_model = model_key(model)
                    programs.keep(session, job_id=job_id, result=compiled, recipe=how)
                    note = no_runner_note(session, required_key=job.gpu_model, model=model)
                    set_status(
                        session,
                        submission,
                        Status.compiled,
                        f"{compiled.message} {WAITS_FOR_GPU}",
                        staff_note=f"{reason}" + (f" {note}" if note else ""),
                    )
                    return Outcome.compiled
                set_status(session, submission, Status.running, "Running on the GPU.")
            return _run(submission_id, job_id, me, spec, source, compiled)
        except Exception as exc:
            if database_unavailable(exc):
                # Not the student's code, nor a grader failure: the task is tried again once
                # the database answers (this worker may take its own job back), and failing
                # that the sweeper hands the job on when its heartbeat goes stale.
                log.warning("job %s: the database is away (%s); trying again", job_id, exc)
                raise
            log.exception("job %s of submission %s failed", job_id, submission_id)
            _fail(submission_id, job_id, me, f"{type(exc).__name__}: {exc}")
            return Outcome.error


def _cannot_run_here(model: str) -> str | None:
    """None when this worker runs the job itself; else why it leaves it for another worker."""
    reason = run_unavailable_reason()
    if reason is not None or not model or serves(worker_gpu_model(), model_key(model)):
        return reason
    here = worker_gpu_model()
    return f"This lab's timings belong to {model} GPUs, not " + (
        f"this worker's {here}." if here else "this worker's GPU, whose model is unknown."
    )


def _run(
    submission_id: int, job_id: int, me: str, spec: LabSpec, source: str, compiled: CompileResult
) -> Outcome:
    """The run stage, recording the verdicts as soon as they are known, then the report."""
    from graders.grade import run_submission

    settings = get_settings()
    gpu, driver = worker_gpu()
    timed_case = spec.timing.case if spec.timing else ""
    with session_scope() as session:
        cached = kept_timings(
            session,
            gpu=gpu,
            driver=driver,
            digest=spec.digest,
            case=timed_case,
            max_age_seconds=settings.reference_timing_max_age_seconds,
        )

    def on_phase(phase: str, partial: GradeReport) -> None:
        with session_scope() as session:
            if not GRADING.hold(session, job_id, me):
                return
            job = session.get_one(GradingJob, job_id)
            submission = session.get_one(Submission, submission_id)
            record_progress(session, submission=submission, job=job, report=partial, phase=phase)

    report = run_submission(
        spec,
        source,
        compiled=compiled,
        secret=settings.grading_secret,
        cached_references=cached,
        on_phase=on_phase,
        engine=settings.engine(),
    )
    with session_scope() as session:
        if not GRADING.hold(session, job_id, me):
            return Outcome.lost
        job = session.get_one(GradingJob, job_id)
        submission = session.get_one(Submission, submission_id)
        record_report(session, submission=submission, job=job, report=report)
        gpu_state = job.stored_report.gpu
        if gpu_state is not None:
            note_timing(
                session,
                name=me,
                temperature_c=gpu_state.temperature_c,
                sm_clock_mhz=gpu_state.sm_clock_mhz,
            )
        keep_timings(
            session,
            gpu=gpu,
            driver=driver,
            digest=spec.digest,
            case=timed_case,
            measured={k: v.to_dict() for k, v in report.measured_references.items()},
        )
        if report.performance_pending:
            retime_later(session, submission=submission, job=job, limit=settings.contended_retimes)
    return Outcome.error if report.error == "internal" else Outcome.graded


def retime_later(session: Session, *, submission: Submission, job: GradingJob, limit: int) -> bool:
    """Queue the submission again at background priority (the sweep sends it when no student's
    upload waits): other work overlapped its timed section, so its performance points are held
    back until a quiet GPU times it. At most `limit` times; then staff decide (its flag says
    why). Returns whether a job was queued."""
    jobs = list(
        session.scalars(select(GradingJob).where(GradingJob.submission_id == submission.id))
    )
    waiting = (JobState.queued.value, JobState.started.value)
    if any(j.state in waiting and j.id != job.id for j in jobs):
        return False  # a regrade is already on its way
    held_back = sum(1 for j in jobs if j.stored_report.performance_pending)
    if held_back > limit:
        return False
    session.add(
        GradingJob(
            submission_id=submission.id, queued_at=utcnow(), priority=Priority.background.value
        )
    )
    return True


def _fail(submission_id: int, job_id: int, me: str, error: str) -> None:
    """The grader failed, never the student's code: the job is queued again while attempts
    remain (a passing fault, such as a child that could not start a thread, then costs the
    student nothing), and only the last attempt ends in `error`."""
    settings = get_settings()
    with session_scope() as session:
        if not GRADING.hold(session, job_id, me):
            return
        job = session.get_one(GradingJob, job_id)
        job.error = error
        # The next attempt compiles afresh: a kept program is run once, not after a fault.
        programs.forget(session, job_id=job_id)
        submission = session.get_one(Submission, submission_id)
        if job.attempt >= settings.max_attempts:
            job.state = JobState.failed.value
            job.finished_at = utcnow()
            set_status(session, submission, Status.error, NOT_YOUR_FAULT, staff_note=error)
            after_grading(session, submission=submission, job=job, verdict=False)
            return
        job.state = JobState.queued.value
        job.queued_at = utcnow()
        job.worker_id = None
        queue = job.taken_queue or job.sent_queue or QUEUE
        if job.priority == Priority.normal.value:
            # Sent once this commits; if the broker refuses it, the sweeper sends it.
            queue_grading(session, job, queue=queue)
        else:  # a lab regrade's job goes out in its turn, with the rest of the regrade
            job.sent_at, job.sent_queue = None, queue
        set_status(
            session,
            submission,
            Status.queued,
            "A problem on our side stopped its grading, not your code; it is queued to be graded "
            f"again (attempt {job.attempt + 1} of {settings.max_attempts}).",
            staff_note=f"Attempt {job.attempt} failed: {error}",
        )
