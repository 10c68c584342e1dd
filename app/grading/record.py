"""Writing compile results and grade reports into the database; what follows a verdict is
app.grading.flows.after_grading."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import delete
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.grading import programs
from app.grading.flows import after_grading
from app.submissions.models import CaseResult, GradingJob, JobState, Status, Submission
from app.submissions.report import StoredReport
from app.submissions.service import set_status

if TYPE_CHECKING:
    from graders.results import CompileResult, GradeReport


NOT_YOUR_FAULT = (
    "Grading stopped because of a problem on our side, not because of your code; "
    "please submit the same file again."
)


def _failed_on_our_side(
    session: Session, *, submission: Submission, job: GradingJob, error: str
) -> None:
    # The grader, not the student's code, failed: no verdict, so an earlier one keeps counting
    # (the gradebook counts graded_at) and the student is told to resubmit.
    job.state = JobState.failed.value
    job.finished_at = utcnow()
    job.error = error
    programs.forget(session, job_id=job.id)
    set_status(session, submission, Status.error, NOT_YOUR_FAULT, staff_note=error)
    after_grading(session, submission=submission, job=job, verdict=False)


def record_compile(
    session: Session, *, submission: Submission, job: GradingJob, result: CompileResult
) -> None:
    if not result.ok and result.reason == "internal":
        _failed_on_our_side(
            session, submission=submission, job=job, error=f"compile: {result.message}"
        )
        return
    submission.compile_ok = result.ok
    submission.compile_reason = result.reason
    submission.compile_message = result.message
    submission.compile_log = result.log
    submission.compile_arch = result.arch
    submission.compile_warnings = list(result.warnings)
    submission.declarations = dict(result.declarations)
    job.compiled_at = utcnow()
    job.compile_seconds = result.seconds
    if job.started_at is not None:
        job.wait_seconds = max(0.0, (job.started_at - job.queued_at).total_seconds())
    if not result.ok:
        job.state = JobState.failed.value
        job.finished_at = utcnow()
        submission.score = 0.0
        submission.graded_at = job.finished_at
        set_status(session, submission, Status.compile_error, result.message)
        after_grading(session, submission=submission, job=job)


def _case_row(job_id: int, position: int, case: Any) -> CaseResult:
    timing = case.timing.to_dict() if case.timing is not None else None
    return CaseResult(
        job_id=job_id,
        position=position,
        name=case.name,
        sizes=dict(case.sizes),
        hidden=case.hidden,
        passed=case.passed,
        verdict=case.verdict,
        message=case.message,
        points=float(case.points),
        max_points=float(case.max_points),
        seed=str(case.seed),
        wrong_count=case.wrong_count,
        first_wrong_index=list(case.first_wrong_index) if case.first_wrong_index else None,
        expected=case.expected,
        got=case.got,
        max_abs_error=case.max_abs_error,
        max_rel_error=case.max_rel_error,
        timing=timing,
        reference_timings={k: v.to_dict() for k, v in case.reference_timings.items()},
    )


def _replace_cases(session: Session, job: GradingJob, cases: list[Any]) -> None:
    session.execute(delete(CaseResult).where(CaseResult.job_id == job.id))
    session.flush()
    for position, case in enumerate(cases):
        session.add(_case_row(job.id, position, case))


PHASES = {
    "timing": (Status.timing, "timing the kernel now"),
    "sanitizer": (Status.sanitizer, "compute-sanitizer checks it now"),
}


def record_progress(
    session: Session, *, submission: Submission, job: GradingJob, report: GradeReport, phase: str
) -> None:
    """The verdicts known so far, shown at once while the grading goes on (timing, sanitizer)."""
    if phase not in PHASES:
        return
    status, doing = PHASES[phase]
    _replace_cases(session, job, report.cases)
    passed = sum(1 for c in report.cases if c.passed)
    set_status(
        session,
        submission,
        status,
        f"{passed} of {len(report.cases)} cases passed so far; {doing}.",
    )


def record_report(
    session: Session, *, submission: Submission, job: GradingJob, report: GradeReport
) -> None:
    """Store one job's cases, score and status; earlier rows of the same job are replaced."""
    if report.error == "internal":
        _failed_on_our_side(session, submission=submission, job=job, error=f"run: {report.summary}")
        return
    _replace_cases(session, job, report.cases)
    programs.forget(session, job_id=job.id)  # run: a regrade is a new job, compiled anew
    job.report = StoredReport.of(report).to_json()
    job.state = JobState.done.value
    job.finished_at = utcnow()
    if job.compiled_at is not None:
        job.run_seconds = max(0.0, (job.finished_at - job.compiled_at).total_seconds())
    submission.score = float(report.score)
    submission.max_score = float(report.max_score)
    submission.summary = report.summary
    submission.review_flag = " ".join(report.flags)
    submission.graded_at = job.finished_at
    set_status(session, submission, Status.graded, report.summary)
    after_grading(session, submission=submission, job=job, report=report)
