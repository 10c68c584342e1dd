"""Profiling jobs: queued after a grading or by staff, recorded, their reports kept and pruned,
and the references' profiles kept per (GPU model, lab version, case).

A profiling job is written in the database and held back (no `sent_at`); the sweep sends
one at a time, and only while no grading waits (app.profiling.sweep), so a profile never
delays a student's verdict. The engine side is graders.profile.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.errors import Conflict, Forbidden
from app.core.settings import get_settings
from app.courses.models import Lab
from app.courses.specs import required_gpu_model, spec_for
from app.jobs.routing import model_key
from app.profiling.models import KernelProfile, ProfileReport, ProfileState, ReferenceProfile
from app.submissions.models import GradingJob, Submission
from app.submissions.service import is_staff_for

if TYPE_CHECKING:
    from app.users.models import User
    from graders.profile.stage import ProfileResult
    from graders.results import GradeReport
    from graders.spec import LabSpec

PENDING = (ProfileState.queued.value, ProfileState.started.value)


def _required_model(lab: Lab, spec: LabSpec) -> str:
    return model_key(required_gpu_model(lab, spec))


def latest_profile(session: Session, *, submission_id: int) -> KernelProfile | None:
    return session.scalar(
        select(KernelProfile)
        .where(KernelProfile.submission_id == submission_id)
        .order_by(KernelProfile.id.desc())
        .limit(1)
    )


def queue_after_grading(
    session: Session, *, submission: Submission, job: GradingJob, report: GradeReport
) -> KernelProfile | None:
    """A profiling job for a grading whose every case passed on a GPU, unless the lab or the
    settings turn profiling off, or one for this lab version is already done or pending."""
    if not get_settings().profile_after_grading or report.error or report.gpu is None:
        return None
    if not report.cases or not all(c.passed for c in report.cases):
        return None

    lab = session.get_one(Lab, submission.lab_id)
    spec = spec_for(lab)
    if not spec.profile.enabled:
        return None
    already = session.scalar(
        select(KernelProfile.id).where(
            KernelProfile.submission_id == submission.id,
            KernelProfile.lab_digest == spec.digest,
            KernelProfile.state.in_([*PENDING, ProfileState.done.value]),
        )
    )
    if already is not None:
        return None
    profile = KernelProfile(
        submission_id=submission.id,
        grading_job_id=job.id,
        state=ProfileState.queued.value,
        queued_at=utcnow(),
        gpu_model=_required_model(lab, spec),
        lab_digest=spec.digest,
        case_name=spec.profile_case.name,
    )
    session.add(profile)
    return profile


def request_profile(
    session: Session, *, user: User, submission: Submission, now: datetime
) -> KernelProfile:
    """Staff: profile this submission (again); the caller commits. Refused while one is
    pending, or where the submission did not compile."""
    if not is_staff_for(session, user, submission):
        raise Forbidden("Only the course's staff may ask for a submission to be profiled.")
    # A write first, so two requests take turns (see submissions.service.regrade).
    session.execute(
        update(Submission)
        .where(Submission.id == submission.id)
        .values(status=Submission.status)
        .execution_options(synchronize_session=False)
    )
    if submission.compile_ok is False:
        raise Conflict(
            f"Submission {submission.id} did not compile, so there is no kernel to profile."
        )
    latest = latest_profile(session, submission_id=submission.id)
    if latest is not None and latest.state in PENDING:
        raise Conflict(
            f"Submission {submission.id} is already waiting to be profiled or being profiled; "
            "its profile shows on its page when it is done."
        )
    lab = session.get_one(Lab, submission.lab_id)
    spec = spec_for(lab)
    profile = KernelProfile(
        submission_id=submission.id,
        requested_by_id=user.id,
        state=ProfileState.queued.value,
        queued_at=now,
        gpu_model=_required_model(lab, spec),
        lab_digest=spec.digest,
        case_name=spec.profile_case.name,
    )
    session.add(profile)
    session.flush()
    return profile


def kept_reference_profiles(
    session: Session, *, gpu: str, digest: str, case: str
) -> dict[str, ReferenceProfile]:
    """Reference name -> its kept profile on this GPU model, lab version and case."""
    if not gpu or not digest:
        return {}
    rows = session.scalars(
        select(ReferenceProfile).where(
            ReferenceProfile.gpu_name == gpu,
            ReferenceProfile.lab_digest == digest,
            ReferenceProfile.case_name == case,
        )
    )
    return {row.reference: row for row in rows}


def keep_reference_profile(
    session: Session,
    *,
    gpu: str,
    digest: str,
    case: str,
    reference: str,
    summary: dict[str, Any],
    ncu_version: str,
    now: datetime | None = None,
) -> None:
    """Store (or replace) one reference's profile; the caller commits."""
    key = {"gpu_name": gpu[:200], "lab_digest": digest, "case_name": case, "reference": reference}
    row = session.scalar(select(ReferenceProfile).filter_by(**key))
    if row is None:
        try:
            with session.begin_nested():  # another worker may keep the same one first
                session.add(
                    ReferenceProfile(
                        **key, summary=summary, ncu_version=ncu_version, profiled_at=now or utcnow()
                    )
                )
            return
        except IntegrityError:
            row = session.scalar(select(ReferenceProfile).filter_by(**key))
            if row is None:
                raise
    row.summary = summary
    row.ncu_version = ncu_version
    row.profiled_at = now or utcnow()


def record_profile(
    session: Session, *, profile: KernelProfile, result: ProfileResult, gpu: str, now: datetime
) -> None:
    """A finished profiling's outcome on its row, its report file kept, the references' kept;
    the caller commits."""
    profile.finished_at = now
    profile.seconds = result.seconds
    profile.ncu_version = result.ncu_version[:40]
    profile.gpu_name = (result.gpu or gpu)[:200]
    profile.case_name = result.case or profile.case_name
    if result.status == "ok" and result.submission is not None:
        profile.state = ProfileState.done.value
        profile.message = ""
        profile.summary = result.submission.summary
        profile.report_bytes = result.submission.report_bytes
        if result.submission.report:
            session.execute(delete(ProfileReport).where(ProfileReport.profile_id == profile.id))
            session.add(ProfileReport(profile_id=profile.id, data=result.submission.report))
            profile.report_kept = True
    else:
        state = ProfileState.unavailable if result.status == "unavailable" else ProfileState.failed
        profile.state = state.value
        profile.message = result.message
    for name, run in result.references.items():
        keep_reference_profile(
            session,
            gpu=profile.gpu_name,
            digest=profile.lab_digest,
            case=profile.case_name,
            reference=name,
            summary=run.summary,
            ncu_version=profile.ncu_version,
            now=now,
        )
    submission = session.get_one(Submission, profile.submission_id)
    prune_reports(session, user_id=submission.user_id, lab_id=submission.lab_id)


def prune_reports(session: Session, *, user_id: int, lab_id: int) -> int:
    """Keep the newest `profile_reports_kept` report files of one student in one lab; the
    older profiles keep their findings. Returns how many files were dropped."""
    keep = get_settings().profile_reports_kept
    kept = list(
        session.scalars(
            select(KernelProfile.id)
            .join(Submission, Submission.id == KernelProfile.submission_id)
            .where(
                Submission.user_id == user_id,
                Submission.lab_id == lab_id,
                KernelProfile.report_kept.is_(True),
            )
            .order_by(KernelProfile.id.desc())
        )
    )
    dropped = kept[keep:]
    if dropped:
        session.execute(delete(ProfileReport).where(ProfileReport.profile_id.in_(dropped)))
        session.execute(
            update(KernelProfile)
            .where(KernelProfile.id.in_(dropped))
            .values(report_kept=False)
            .execution_options(synchronize_session=False)
        )
    return len(dropped)


def report_file(session: Session, *, profile: KernelProfile) -> bytes | None:
    return session.scalar(select(ProfileReport.data).where(ProfileReport.profile_id == profile.id))
