"""The submissions' API: a course's labs as the caller may submit to them, uploading, reading,
regrading and listing submissions, and a submission's source.
"""

from __future__ import annotations

from contextlib import suppress
from datetime import datetime
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, File, Query, Request, Response, UploadFile
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.api.errors import COURSE, errors
from app.core.database import utcnow
from app.core.errors import NotFound
from app.core.overload import commit_or_confirm
from app.core.settings import get_settings
from app.courses.deadlines import deadline_for, lab_state
from app.courses.models import Lab, LatePolicy
from app.courses.service import get_course, get_lab, labs_of, require_member, require_staff
from app.latedays.service import available_for
from app.rubric.service import points_possible
from app.submissions.models import Status
from app.submissions.quota import submission_quota
from app.submissions.schemas import SubmissionCreated, SubmissionRead, submission_read
from app.submissions.service import (
    create_submission,
    get_visible_submission,
    regrade,
    source_text_of,
    submissions_of,
    visible_submission,
)
from app.users.models import User
from app.users.service import find_user
from app.web.deps import ApiDb, RowId

router = APIRouter(prefix="/api/v1")


class LabRead(BaseModel):
    slug: str
    title: str
    release_at: datetime | None
    # The due date in force for the caller: their extension's where they have one.
    due_at: datetime | None
    lab_due_at: datetime | None
    extended: bool
    score_policy: str
    late_policy: str
    # The lab's maximum: its autograde's points and its rubric items' (points_possible).
    max_score: float
    open: bool
    submit_url: str
    # Submissions this user may still make to the lab in the current window; None: no limit.
    submissions_remaining: int | None = None


class SubmissionListItem(BaseModel):
    id: int
    url: str
    lab: str
    user: str
    status: Status
    score: float | None
    max_score: float | None
    late: bool
    created_at: datetime


@router.get("/courses/{course}/labs", tags=["courses"], responses=errors(*COURSE))
async def list_labs(course: str, api: ApiDb) -> list[LabRead]:
    def work(session: Session, user: User) -> list[LabRead]:
        found = get_course(session, slug=course)
        role = require_member(session, user=user, course=found)
        now = utcnow()
        labs = []
        listed = labs_of(session, course=found)
        most = points_possible(session, labs=listed)
        for lab in listed:
            deadline = deadline_for(session, lab=lab, user_id=user.id)
            # A lab refusing late work stays open while the caller's late days cover it.
            grace = 0
            if lab.late_policy == LatePolicy.refuse.value and deadline.is_late(now):
                grace = available_for(session, course=found, lab=lab, user_id=user.id)
            labs.append(
                LabRead(
                    slug=lab.slug,
                    title=lab.title,
                    release_at=lab.release_at,
                    due_at=deadline.due_at,
                    lab_due_at=lab.due_at,
                    extended=deadline.extended,
                    score_policy=lab.score_policy,
                    late_policy=lab.late_policy,
                    max_score=most[lab.id],
                    open=lab_state(
                        lab, deadline, now=now, staff=role.is_staff, late_days=grace
                    ).accepts,
                    submit_url=f"/api/v1/courses/{found.slug}/labs/{lab.slug}/submissions",
                    submissions_remaining=submission_quota(
                        session, user=user, lab=lab, now=now
                    ).remaining,
                )
            )
        return labs

    return await api.run(work)


@router.post(
    "/courses/{course}/labs/{lab}/submissions",
    status_code=202,
    tags=["submissions"],
    responses=errors(401, 403, 404, 413, 429, 503),
)
async def submit(
    course: str,
    lab: str,
    file: Annotated[UploadFile, File(description="the .cu source file (exactly one)")],
    api: ApiDb,
    response: Response,
    request: Request,
) -> SubmissionCreated:
    # The form FastAPI read for `file` (kept by the request): a second part would be dropped.
    files = len((await request.form()).getlist("file"))

    def work(session: Session, user: User) -> SubmissionCreated:
        limit = get_settings().max_upload_bytes
        # Read one byte past the limit: enough to refuse, without holding a huge upload.
        data = file.file.read(limit + 1)
        found = get_course(session, slug=course)
        intake = create_submission(
            session,
            user=user,
            course=found,
            lab=get_lab(session, course=found, slug=lab),
            filename=file.filename,
            data=data,
            now=utcnow(),
            size=file.size,
            files=files,
        )
        # The row must exist before the worker can be told about it: its job goes to this
        # process's sender once the commit lands (app.jobs.sender). A commit that fails
        # raises here, and the client is told that nothing was stored (503), or, where the
        # database went away mid-commit and did not come back to say, that it may have been.
        commit_or_confirm(session, landed=intake.stored)
        # Stored, and handed to the sender, so the answer never waits on the broker: from here
        # on no database error may turn into "not stored", so the quota headers are best
        # effort, and their read ends here rather than in a closing commit that a database
        # going away could fail.
        try:
            now = utcnow()
            lab_row = session.get_one(Lab, intake.lab_id)
            quota = submission_quota(session, user=user, lab=lab_row, now=now)
            response.headers.update(quota.headers(now))
        except SQLAlchemyError:
            pass
        with suppress(SQLAlchemyError):
            session.rollback()
        return SubmissionCreated(
            id=intake.submission_id,
            status=Status.queued,
            url=f"/submissions/{intake.submission_id}",
        )

    return await api.run(work)


@router.get("/submissions/{submission_id}", tags=["submissions"], responses=errors(401, 404, 503))
async def get_submission(submission_id: RowId, api: ApiDb) -> SubmissionRead:
    def work(session: Session, user: User) -> SubmissionRead:
        submission, staff = visible_submission(session, user=user, submission_id=submission_id)
        return submission_read(session, submission=submission, viewer_is_staff=staff)

    return await api.run(work)


@router.post(
    "/submissions/{submission_id}/regrade",
    status_code=202,
    tags=["submissions"],
    responses=errors(401, 403, 404, 409, 503),
)
async def regrade_submission(submission_id: RowId, api: ApiDb) -> SubmissionCreated:
    """Staff: grade a submission again (e.g. once a GPU worker is up, or after a lab fix)."""

    def work(session: Session, user: User) -> SubmissionCreated:
        submission = get_visible_submission(session, user=user, submission_id=submission_id)
        regrade(session, user=user, submission=submission, now=utcnow())
        session.commit()  # its job is sent once this commits
        return SubmissionCreated(
            id=submission.id, status=Status.queued, url=f"/submissions/{submission.id}"
        )

    return await api.run(work)


@router.get("/courses/{course}/submissions", tags=["submissions"], responses=errors(*COURSE))
async def list_submissions(
    course: str,
    api: ApiDb,
    lab: Annotated[str | None, Query(description="a lab slug")] = None,
    student: Annotated[str | None, Query(alias="user", description="a student's email")] = None,
) -> list[SubmissionListItem]:
    def work(session: Session, user: User) -> list[SubmissionListItem]:
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        # Removed labs' submissions stay, and so they stay listed here.
        labs = labs_of(session, course=found) + labs_of(session, course=found, archived=True)
        if lab is not None:
            labs = [get_lab(session, course=found, slug=lab)]
        user_id = None
        if student is not None:
            owner = find_user(session, email=student)
            if owner is None:
                raise NotFound(f"There is no user with email {student}.")
            user_id = owner.id
        slugs = {item.id: item.slug for item in labs}
        rows = submissions_of(session, lab_ids=list(slugs), user_id=user_id)
        owners = select(User.id, User.email).where(User.id.in_({r.user_id for r in rows}))
        emails = {uid: email for uid, email in session.execute(owners)}
        return [
            SubmissionListItem(
                id=r.id,
                url=f"/submissions/{r.id}",
                lab=slugs[r.lab_id],
                user=emails[r.user_id],
                status=Status(r.status),
                score=r.score,
                max_score=r.max_score,
                late=r.late,
                created_at=r.created_at,
            )
            for r in rows
        ]

    return await api.run(work)


@router.get(
    "/submissions/{submission_id}/source",
    tags=["submissions"],
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/plain": {}}}, **errors(401, 404, 503)},
)
async def submission_source(submission_id: RowId, api: ApiDb) -> PlainTextResponse:
    """The submitted file as it was stored (its author and the course's staff)."""

    def work(session: Session, user: User) -> tuple[str, str]:
        submission = get_visible_submission(session, user=user, submission_id=submission_id)
        return submission.filename, source_text_of(session, submission=submission)

    filename, source = await api.run(work)
    name = filename.replace('"', "_")
    ascii_name = name.encode("ascii", "replace").decode().replace("?", "_")
    return PlainTextResponse(
        source,
        media_type="text/plain; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="{ascii_name}"; '
            f"filename*=UTF-8''{quote(name)}"
        },
    )
