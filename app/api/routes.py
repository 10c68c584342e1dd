"""REST endpoints: thin handlers that fetch, check access and delegate to services."""

from __future__ import annotations

import io
import tempfile
from collections.abc import AsyncIterator
from contextlib import suppress
from datetime import datetime
from typing import IO, Annotated

from fastapi import APIRouter, File, Query, Response, UploadFile
from fastapi.responses import StreamingResponse
from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app import __version__
from app.core.database import ping, utcnow
from app.core.deps import ApiDb, RowId, in_health_thread
from app.core.errors import NotFound
from app.core.overload import commit_or_confirm
from app.core.settings import get_settings
from app.courses.models import Lab
from app.courses.service import get_course, get_lab, labs_of, require_member, require_staff
from app.gradebook.service import write_gradebook_csv
from app.grading.queue import send_job, stamp_send
from app.submissions.models import Status
from app.submissions.quota import submission_quota
from app.submissions.schemas import SubmissionCreated, SubmissionRead, submission_read
from app.submissions.service import (
    create_submission,
    get_visible_submission,
    regrade,
    submissions_of,
    visible_submission,
)
from app.users.models import User
from app.users.service import find_user

router = APIRouter(prefix="/api/v1")


class Health(BaseModel):
    status: str
    version: str
    database: str


class LabRead(BaseModel):
    slug: str
    title: str
    release_at: datetime | None
    due_at: datetime | None
    score_policy: str
    late_policy: str
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


@router.get("/health", tags=["meta"])
async def health() -> Health:
    # Its own threads and connection, outside the bound on requests in flight: it answers
    # while every request thread is busy.
    await in_health_thread(ping)
    return Health(status="ok", version=__version__, database="ok")


@router.get("/courses/{course}/labs", tags=["courses"])
async def list_labs(course: str, api: ApiDb) -> list[LabRead]:
    def work(session: Session, user: User) -> list[LabRead]:
        found = get_course(session, slug=course)
        require_member(session, user=user, course=found)
        now = utcnow()
        return [
            LabRead(
                slug=lab.slug,
                title=lab.title,
                release_at=lab.release_at,
                due_at=lab.due_at,
                score_policy=lab.score_policy,
                late_policy=lab.late_policy,
                max_score=lab.max_score,
                open=(lab.release_at is None or lab.release_at <= now)
                and not (lab.due_at and now > lab.due_at and lab.late_policy == "refuse"),
                submit_url=f"/api/v1/courses/{found.slug}/labs/{lab.slug}/submissions",
                submissions_remaining=submission_quota(
                    session, user=user, lab=lab, now=now
                ).remaining,
            )
            for lab in labs_of(session, course=found)
        ]

    return await api.run(work)


@router.post("/courses/{course}/labs/{lab}/submissions", status_code=202, tags=["submissions"])
async def submit(
    course: str,
    lab: str,
    file: Annotated[UploadFile, File(description="the .cu source file")],
    api: ApiDb,
    response: Response,
) -> SubmissionCreated:
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
        )
        # The row must exist before the worker can be told about it. A commit that fails
        # raises here, and the client is told that nothing was stored (503), or, where the
        # database went away mid-commit and did not come back to say, that it may have been.
        stamp = stamp_send(intake.job)
        commit_or_confirm(session, landed=intake.stored)
        send_job(submission_id=intake.submission_id, job_id=intake.job_id, stamped_at=stamp)
        # Stored and sent: from here on no database error may turn into "not stored", so the
        # quota headers are best effort, and their read ends here rather than in a closing
        # commit that a database going away could fail.
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


@router.get("/submissions/{submission_id}", tags=["submissions"])
async def get_submission(submission_id: RowId, api: ApiDb) -> SubmissionRead:
    def work(session: Session, user: User) -> SubmissionRead:
        submission, staff = visible_submission(session, user=user, submission_id=submission_id)
        return submission_read(session, submission=submission, viewer_is_staff=staff)

    return await api.run(work)


@router.post("/submissions/{submission_id}/regrade", status_code=202, tags=["submissions"])
async def regrade_submission(submission_id: RowId, api: ApiDb) -> SubmissionCreated:
    """Staff: grade a submission again (e.g. once a GPU worker is up, or after a lab fix)."""

    def work(session: Session, user: User) -> SubmissionCreated:
        submission = get_visible_submission(session, user=user, submission_id=submission_id)
        job = regrade(session, user=user, submission=submission, now=utcnow())
        stamp = stamp_send(job)
        session.commit()
        send_job(submission_id=submission.id, job_id=job.id, stamped_at=stamp)
        return SubmissionCreated(
            id=submission.id, status=Status.queued, url=f"/submissions/{submission.id}"
        )

    return await api.run(work)


@router.get("/courses/{course}/submissions", tags=["submissions"])
async def list_submissions(
    course: str,
    api: ApiDb,
    lab: Annotated[str | None, Query(description="a lab slug")] = None,
    student: Annotated[str | None, Query(alias="user", description="a student's email")] = None,
) -> list[SubmissionListItem]:
    def work(session: Session, user: User) -> list[SubmissionListItem]:
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        labs = labs_of(session, course=found)
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


# The CSV is written to a spool (memory up to this size, a temporary file past it) in the
# request's thread, then sent from it in chunks: the database is done with before the first
# byte goes out, so a slow download holds no connection and no thread.
SPOOL_IN_MEMORY_BYTES = 1024 * 1024
CHUNK_BYTES = 64 * 1024


@router.get(
    "/courses/{course}/gradebook.csv",
    tags=["gradebook"],
    response_class=StreamingResponse,
    responses={200: {"content": {"text/csv": {}}}},
)
async def export_gradebook(course: str, api: ApiDb) -> StreamingResponse:
    def work(session: Session, user: User) -> tuple[str, IO[bytes]]:
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY_BYTES)  # noqa: SIM115
        text = io.TextIOWrapper(spool, encoding="utf-8", newline="")
        write_gradebook_csv(session, course=found, out=text)
        text.flush()
        text.detach()
        spool.seek(0)
        return found.slug, spool

    slug, spool = await api.run(work)

    async def chunks() -> AsyncIterator[bytes]:
        try:
            while chunk := spool.read(CHUNK_BYTES):
                yield chunk
        finally:
            spool.close()

    return StreamingResponse(
        chunks(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{slug}-gradebook.csv"'},
    )
