"""REST endpoints of profiles: a submission's findings, asking for one (staff), its report
file, a student's history in a lab, and the class's common findings (staff)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel
from sqlalchemy.orm import Session

from app.api.errors import COURSE, errors
from app.core.database import utcnow
from app.core.errors import Forbidden, NotFound
from app.courses.models import Course, Lab
from app.courses.service import get_course, get_lab, require_member, require_staff
from app.courses.specs import spec_for
from app.profiling.models import KernelProfile
from app.profiling.service import report_file, request_profile
from app.profiling.views import (
    ProfileView,
    class_summary,
    history,
    may_download,
    profile_view,
)
from app.submissions.service import visible_submission
from app.users.models import User
from app.users.service import find_user
from app.web.deps import ApiDb, RowId

router = APIRouter(prefix="/api/v1", tags=["profiles"], responses=errors(*COURSE))


class FindingRead(BaseModel):
    kind: str
    title: str
    sentence: str
    line: int | None
    kernel: str
    # NVIDIA's estimate of the time fixing it could save, in percent: of the kernel's time
    # ("global") or of the part concerned ("local").
    estimated_speedup: float | None
    speedup_type: str
    metrics: dict[str, str]  # the Nsight Compute metrics it rests on
    rule: str


class LadderRead(BaseModel):
    gpu: str
    order: list[str]  # the references, slowest first
    rows: list[dict[str, Any]]
    resembles: str
    next_up: str
    sentence: str
    differences: list[str]


class ProfileRead(BaseModel):
    submission: int
    # none, queued, started, done, unavailable, failed, withheld (a hidden case, until the
    # due date)
    state: str
    message: str
    case: str
    gpu: str
    ncu_version: str
    seconds: float | None
    finished_at: datetime | None
    findings: list[FindingRead]
    ladder: LadderRead | None
    figures: dict[str, float]
    report_url: str | None
    stale: bool


class ProfileQueued(BaseModel):
    id: int
    state: str
    url: str


class HistoryPointRead(BaseModel):
    submission: int
    number: int
    created_at: datetime
    status: str
    score: float | None
    median_ms: float | None
    all_passed: bool
    ratios: dict[str, float]
    peak_percent: float | None
    peak_kind: str
    top_finding: str
    # The profile ran on a hidden case: its findings show once the lab's grades are released.
    profile_withheld: bool
    best_so_far: bool


class CommonFindingRead(BaseModel):
    kind: str
    title: str
    students: int
    share: float
    examples: list[str]


class ClassSummaryRead(BaseModel):
    students: int
    counted: int
    profiled: int
    findings: list[CommonFindingRead]


def profile_read(submission_id: int, view: ProfileView) -> ProfileRead:
    ladder = None
    if view.ladder is not None:
        ladder = LadderRead(**vars(view.ladder))
    return ProfileRead(
        submission=submission_id,
        state=view.state,
        message=view.message,
        case=view.case,
        gpu=view.gpu_name,
        ncu_version=view.ncu_version,
        seconds=view.seconds,
        finished_at=view.finished_at,
        findings=[
            FindingRead(
                kind=f.kind,
                title=f.title,
                sentence=f.sentence,
                line=f.line,
                kernel=f.kernel,
                estimated_speedup=f.speedup,
                speedup_type=f.speedup_type,
                metrics=dict(f.metrics),
                rule=f.rule,
            )
            for f in view.findings
        ],
        ladder=ladder,
        figures=view.figures,
        report_url=view.download_url,
        stale=view.stale,
    )


@router.get("/submissions/{submission_id}/profile")
async def get_profile(submission_id: RowId, api: ApiDb) -> ProfileRead:
    """The submission's latest profile: findings on lines, ranked, and its ladder."""

    def work(session: Session, user: User) -> ProfileRead:
        submission, staff = visible_submission(session, user=user, submission_id=submission_id)
        spec = spec_for(session.get_one(Lab, submission.lab_id))
        view = profile_view(session, submission=submission, spec=spec, viewer_is_staff=staff)
        return profile_read(submission.id, view)

    return await api.run(work)


@router.post("/submissions/{submission_id}/profile", status_code=202)
async def ask_for_profile(submission_id: RowId, api: ApiDb) -> ProfileQueued:
    """Staff: profile the submission (again), behind any grading that waits."""

    def work(session: Session, user: User) -> ProfileQueued:
        submission, _ = visible_submission(session, user=user, submission_id=submission_id)
        profile = request_profile(session, user=user, submission=submission, now=utcnow())
        session.commit()
        return ProfileQueued(
            id=profile.id, state=profile.state, url=f"/api/v1/submissions/{submission.id}/profile"
        )

    return await api.run(work)


@router.get(
    "/submissions/{submission_id}/profile.ncu-rep",
    response_class=Response,
    responses={200: {"content": {"application/octet-stream": {}}}},
)
async def profile_report(submission_id: RowId, api: ApiDb) -> Response:
    """The latest profile's Nsight Compute report file (staff; students where the lab allows):
    open it in Nsight Compute."""

    def work(session: Session, user: User) -> tuple[bytes, int]:
        submission, staff = visible_submission(session, user=user, submission_id=submission_id)
        spec = spec_for(session.get_one(Lab, submission.lab_id))
        view = profile_view(session, submission=submission, spec=spec, viewer_is_staff=staff)
        if not may_download(spec, viewer_is_staff=staff):
            raise Forbidden(
                "This lab lets only its staff download Nsight Compute's report files; the "
                "findings on the submission's page come from the same report."
            )
        # The profile the view shows (already in the session: no second query for it).
        profile = session.get(KernelProfile, view.profile_id) if view.profile_id else None
        data = report_file(session, profile=profile) if profile and view.download_url else None
        if data is None:
            raise NotFound(
                f"Submission {submission.id} has no kept report file: it was not profiled, "
                "or its report was pruned (staff can ask for a new profile)."
            )
        return data, submission.id

    data, sid = await api.run(work)
    return Response(
        data,
        media_type="application/octet-stream",
        headers={"Content-Disposition": f'attachment; filename="submission-{sid}.ncu-rep"'},
    )


@router.get("/courses/{course}/labs/{lab}/history")
async def lab_history(
    course: str,
    lab: str,
    api: ApiDb,
    student: Annotated[
        str | None, Query(alias="user", description="staff: a student's email")
    ] = None,
) -> list[HistoryPointRead]:
    """Each of your submissions to the lab (staff: a student's): time, ratio to the
    references, percent of peak and top finding, the best so far marked."""

    def work(session: Session, user: User) -> list[HistoryPointRead]:
        found = get_course(session, slug=course)
        lab_row = get_lab(session, course=found, slug=lab)
        owner, staff = history_owner(session, user=user, lab=lab_row, email=student)
        points = history(
            session, lab=lab_row, spec=spec_for(lab_row), user_id=owner.id, viewer_is_staff=staff
        )
        return [
            HistoryPointRead(
                submission=p.submission_id,
                number=p.number,
                created_at=p.created_at,
                status=p.status,
                score=p.score,
                median_ms=p.median_ms,
                all_passed=p.all_passed,
                ratios=p.ratios,
                peak_percent=p.peak_percent,
                peak_kind=p.peak_kind,
                top_finding=p.top_finding,
                profile_withheld=p.profile_withheld,
                best_so_far=p.best_so_far,
            )
            for p in points
        ]

    return await api.run(work)


def _example(submission_id: int, line: int | None) -> str:
    return f"/submissions/{submission_id}" + (f"#L{line}" if line else "")


def history_owner(
    session: Session, *, user: User, lab: Lab, email: str | None
) -> tuple[User, bool]:
    """Whose history: the viewer's own, or (staff only) the student with this email; and
    whether the viewer is the course's staff."""
    course = session.get_one(Course, lab.course_id)
    role = require_member(session, user=user, course=course)
    if not email or email.strip().lower() == user.email.lower():
        return user, role.is_staff
    if not role.is_staff:
        raise Forbidden("Only the course's staff may see another student's history.")
    owner = find_user(session, email=email.strip())
    if owner is None:
        raise NotFound(f"There is no user with email {email}.")
    return owner, True


@router.get("/courses/{course}/labs/{lab}/profiles")
async def lab_profiles(course: str, lab: str, api: ApiDb) -> ClassSummaryRead:
    """Staff: the findings most common across the class's counted submissions."""

    def work(session: Session, user: User) -> ClassSummaryRead:
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        summary = class_summary(session, lab=get_lab(session, course=found, slug=lab))
        return ClassSummaryRead(
            students=summary.students,
            counted=summary.counted,
            profiled=summary.profiled,
            findings=[
                CommonFindingRead(
                    kind=c.kind,
                    title=c.title,
                    students=c.students,
                    share=c.share,
                    examples=[_example(sid, line) for sid, line in c.examples],
                )
                for c in summary.common
            ],
        )

    return await api.run(work)
