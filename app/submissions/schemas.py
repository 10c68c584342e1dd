"""What the API and pages show of a submission, with hidden cases hidden from students."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.errors import DomainError
from app.courses.models import Course, Lab
from app.courses.release import is_released
from app.courses.specs import spec_for
from app.submissions.models import CaseResult, GradingJob, JobState, Status, Submission
from app.submissions.report import StoredReport
from app.submissions.service import events_of, queue_position
from app.users.models import User
from graders.results import HIDDEN_OUTPUT_NOTE


class CaseErrors(BaseModel):
    wrong_count: int
    first_wrong_index: list[int] | None
    expected: float | None
    got: float | None
    max_abs_error: float | None
    max_rel_error: float | None


class CaseRead(BaseModel):
    name: str
    hidden: bool
    passed: bool
    # None where a hidden case's details stay hidden from a student until the grades' release.
    sizes: dict[str, int | float] | None  # whole numbers, and floats (alpha = 0.01)
    verdict: str | None
    message: str | None
    points: float | None
    max_points: float | None
    seed: str | None
    errors: CaseErrors | None
    timings: dict[str, Any] | None


class StatusChange(BaseModel):
    status: Status
    message: str
    # For the course's staff only (None for students): the technical side of the change.
    staff_note: str | None = None
    at: datetime


class SubmissionRead(BaseModel):
    id: int
    url: str
    course: str
    lab: str
    user: str
    filename: str
    sha256: str
    status: Status
    # A sentence for whoever reads it, the student included.
    status_message: str
    # For the course's staff only (None for students): what the student is not told, such as
    # a driver error, which worker to start, or where to look (/admin/system).
    staff_note: str | None = None
    queue_position: int | None
    late: bool
    score: float | None
    max_score: float | None
    summary: str
    created_at: datetime
    graded_at: datetime | None
    compile_ok: bool | None
    compile_message: str
    compile_log: str
    compile_arch: str
    compile_warnings: list[Any]
    declarations: dict[str, Any]
    findings: list[dict[str, Any]]
    # Where and how the run stage ran: the GPU (name, SM clock, temperature), seconds per
    # stage, and the kernel's printf output (capped by the sandbox).
    gpu: dict[str, Any] | None = None
    # The GPU model the timings and performance points were measured on; None before a run.
    gpu_model: str | None = None
    stage_seconds: dict[str, float] = {}
    stdout: str = ""
    # On which GPU and when each reference the timed case is scored against was timed, and
    # whether that timing was kept from an earlier grading.
    references_timed: list[dict[str, Any]] = []
    # For staff only (None for students): why this grading deserves a look.
    review_flag: str | None = None
    # For staff only: the lab version (content digest) the shown result was graded against,
    # "" when it predates the record; and the version the lab is at now.
    lab_version: str | None = None
    lab_version_now: str | None = None
    attempts: int
    cases: list[CaseRead]
    history: list[StatusChange]


class SubmissionCreated(BaseModel):
    id: int
    status: Status
    url: str


def result_job(jobs: list[GradingJob]) -> GradingJob | None:
    """The job whose verdict the submission shows, of all its jobs: the newest graded one, or
    a newer compile error (it has no cases; the older job's cases are not its result). Jobs
    that failed on our side carry an error and leave the earlier verdict in place."""
    verdicts = [
        job
        for job in jobs
        if job.state == JobState.done.value
        or (job.state == JobState.failed.value and job.error == "" and job.compiled_at is not None)
    ]
    if not verdicts:
        return None
    return max(verdicts, key=lambda job: (job.finished_at or job.queued_at, job.id))


def _case_read(row: CaseResult, *, show_hidden: bool, gpu_model: str | None) -> CaseRead:
    if row.hidden and not show_hidden:
        return CaseRead(
            name=row.name,
            hidden=True,
            passed=row.passed,
            sizes=None,
            verdict=None,
            message=None,
            points=None,
            max_points=None,
            seed=None,
            errors=None,
            timings=None,
        )
    timings: dict[str, Any] = {}
    if row.timing:
        timings["kernel"] = row.timing
    if row.reference_timings:
        timings["references"] = row.reference_timings
    if timings and gpu_model:
        # Times compare only on one GPU model; every set of them says which.
        timings["gpu_model"] = gpu_model
    return CaseRead(
        name=row.name,
        hidden=row.hidden,
        passed=row.passed,
        sizes=row.sizes,
        verdict=row.verdict,
        message=row.message,
        points=row.points,
        max_points=row.max_points,
        seed=row.seed,
        errors=CaseErrors(
            wrong_count=row.wrong_count,
            first_wrong_index=row.first_wrong_index,
            expected=row.expected,
            got=row.got,
            max_abs_error=row.max_abs_error,
            max_rel_error=row.max_rel_error,
        ),
        timings=timings or None,
    )


def hidden_details_visible(course: Course, lab: Lab, *, viewer_is_staff: bool) -> bool:
    """Staff always; students once the lab's grades are released (app.courses.release: by
    default the due date, plus the late-day cap where the course gives late days)."""
    return viewer_is_staff or is_released(course, lab, now=utcnow())


HIDDEN_OUTPUT = (
    "What the kernel printed is shown once the grades are released, since it includes what it "
    "printed during the hidden cases."
)


def _redact(text: str, hidden_names: list[str]) -> str:
    # The engine's summary names the first failing case with its verdict, "the first failure
    # is NAME (wrong answer)"; for a hidden case the verdict is a detail students wait for.
    for name in hidden_names:
        text = re.sub(rf"(?<![\w.-]){re.escape(name)} \([a-z ]+\)", f"{name} (hidden)", text)
    return text


def _references_timed(cases: list[CaseRead]) -> list[dict[str, Any]]:
    for case in cases:
        refs = (case.timings or {}).get("references") or {}
        if refs:
            keys = ("gpu", "driver", "measured_at", "reused")
            return [{"reference": name, **{k: t.get(k) for k in keys}} for name, t in refs.items()]
    return []


def _lab_version_now(lab: Lab) -> str | None:
    try:
        return spec_for(lab).digest
    except DomainError:  # the folder no longer loads: its page says so elsewhere
        return None


def submission_read(
    session: Session, *, submission: Submission, viewer_is_staff: bool
) -> SubmissionRead:
    # Its lab, course and author, and all of its jobs (one, or a few after regrades): one read.
    found = session.execute(
        select(Lab, Course, User.email, GradingJob)
        .join(Course, Course.id == Lab.course_id)
        .join(User, User.id == submission.user_id)
        .outerjoin(GradingJob, GradingJob.submission_id == submission.id)
        .where(Lab.id == submission.lab_id)
    ).all()
    lab, course, owner_email = found[0][0], found[0][1], found[0][2]
    jobs = [row[3] for row in found if row[3] is not None]
    latest = max(jobs, key=lambda j: j.id) if jobs else None
    job = result_job(jobs)
    if job is not None and job.state != JobState.done.value:
        job = None  # a compile error: no cases, no run report
    timing = submission.status in (Status.timing.value, Status.sanitizer.value)
    if timing and latest is not None and latest.state == JobState.started.value:
        job = latest  # the verdicts known so far, while timing and the sanitizer run
    attempts = sum(j.attempt for j in jobs)
    course_slug = course.slug
    show_hidden = hidden_details_visible(course, lab, viewer_is_staff=viewer_is_staff)
    # Only a job a worker took has case rows, hidden ones among them (a job that recorded
    # verdicts and then lost its worker keeps them, and its history may name them): a
    # submission whose jobs all still wait for their first worker needs no look.
    ran = any(j.attempt > 0 or j.state != JobState.queued.value for j in jobs)
    redact = not show_hidden and ran
    # The shown job's cases, and where hidden details are withheld every job's hidden cases'
    # names (the history may name them): one read.
    rows: list[CaseResult] = []
    hidden: list[str] = []
    wanted = [j.id for j in jobs] if redact else ([job.id] if job is not None else [])
    if wanted:
        query = select(CaseResult).where(CaseResult.job_id.in_(wanted))
        if redact and job is not None:
            query = query.where((CaseResult.job_id == job.id) | CaseResult.hidden.is_(True))
        elif redact:
            query = query.where(CaseResult.hidden.is_(True))
        for row in session.scalars(query.order_by(CaseResult.job_id, CaseResult.position)):
            if job is not None and row.job_id == job.id:
                rows.append(row)
            if redact and row.hidden and row.name not in hidden:
                hidden.append(row.name)
    report = job.stored_report if job is not None else StoredReport()
    stdout = report.stdout
    gpu_model = report.gpu_name or None
    cases = [_case_read(row, show_hidden=show_hidden, gpu_model=gpu_model) for row in rows]
    ran_hidden = [row.name for row in rows if row.hidden and row.verdict != "not_run"]
    withheld_at_source = all(HIDDEN_OUTPUT_NOTE.format(name=name) in stdout for name in ran_hidden)
    if hidden and stdout and not withheld_at_source:
        # The engine withholds what a kernel prints during a hidden case and says so per case;
        # output without that line (cut by the cap, or from an older engine) may hold hidden
        # sizes or data, so the student reads it once the details are theirs to see.
        stdout = HIDDEN_OUTPUT
    return SubmissionRead(
        id=submission.id,
        url=f"/submissions/{submission.id}",
        course=course_slug,
        lab=lab.slug,
        user=owner_email,
        filename=submission.filename,
        sha256=submission.sha256,
        status=Status(submission.status),
        status_message=_redact(submission.status_message, hidden),
        staff_note=submission.status_staff_note if viewer_is_staff else None,
        queue_position=queue_position(session, job=latest),
        late=submission.late,
        score=submission.score,
        max_score=submission.max_score,
        summary=_redact(submission.summary, hidden),
        created_at=submission.created_at,
        graded_at=submission.graded_at,
        compile_ok=submission.compile_ok,
        compile_message=submission.compile_message,
        compile_log=submission.compile_log,
        compile_arch=submission.compile_arch,
        compile_warnings=submission.compile_warnings or [],
        declarations=submission.declarations or {},
        findings=[finding.model_dump() for finding in report.findings],
        gpu=report.gpu.model_dump() if report.gpu is not None else None,
        gpu_model=gpu_model,
        stage_seconds=report.stage_seconds,
        stdout=stdout,
        references_timed=_references_timed(cases),
        review_flag=submission.review_flag if viewer_is_staff else None,
        lab_version=(job.lab_digest if job else None) if viewer_is_staff else None,
        lab_version_now=_lab_version_now(lab) if viewer_is_staff else None,
        attempts=attempts,
        cases=cases,
        history=[
            StatusChange(
                status=Status(e.status),
                message=_redact(e.message, hidden),
                staff_note=e.staff_note if viewer_is_staff else None,
                at=e.at,
            )
            for e in events_of(session, submission=submission)
        ],
    )
