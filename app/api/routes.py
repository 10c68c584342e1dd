"""REST endpoints: thin handlers that fetch, check access and delegate to services."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal
from urllib.parse import quote

from fastapi import APIRouter, File, Query, Response, UploadFile
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel
from sqlalchemy import select, text

from app import __version__
from app.core.database import utcnow
from app.core.deps import ApiUser, RowId, SessionDep
from app.core.errors import NotFound
from app.core.settings import get_settings
from app.courses.deadlines import deadline_for, lab_state
from app.courses.models import Lab
from app.courses.service import get_course, get_lab, labs_of, require_member, require_staff
from app.fleet.service import grading_sentence, recent_workers
from app.gradebook.service import canvas_csv, gradebook_csv
from app.grading.queue import send_job
from app.submissions.models import Status
from app.submissions.quota import submission_quota
from app.submissions.schemas import SubmissionCreated, SubmissionRead, submission_read
from app.submissions.service import (
    create_submission,
    get_visible_submission,
    is_staff_for,
    regrade,
    submissions_of,
)
from app.users.models import User
from app.users.service import find_user

router = APIRouter(prefix="/api/v1")


class WorkerReport(BaseModel):
    """A worker heard from in the last day: what it can do and when it was last heard."""

    id: int
    gpu: str  # CUDA_VISIBLE_DEVICES of the worker process; "" for none in particular
    gpu_model: str
    arch: str
    compile: bool
    run: bool
    alive: bool
    stopped: bool
    last_heard_at: datetime
    note: str  # why it cannot run kernels, where it cannot


class Health(BaseModel):
    status: str
    version: str
    database: str
    # "ok", or a sentence saying what waits because no live worker can do it.
    grading: str = "ok"
    workers: list[WorkerReport] = []


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
def health(session: SessionDep) -> Health:
    session.execute(text("SELECT 1"))
    workers = recent_workers(session)
    return Health(
        status="ok",
        version=__version__,
        database="ok",
        grading=grading_sentence(workers),
        # Host names stay on the staff page: this endpoint answers anyone.
        workers=[
            WorkerReport(
                id=w.id,
                gpu=w.gpu,
                gpu_model=w.gpu_model,
                arch=w.arch,
                compile=w.can_compile,
                run=w.can_run,
                alive=w.alive,
                stopped=w.stopped_at is not None,
                last_heard_at=w.heartbeat_at,
                note=w.note,
            )
            for w in workers
        ],
    )


@router.get("/courses/{course}/labs", tags=["courses"])
def list_labs(course: str, session: SessionDep, user: ApiUser) -> list[LabRead]:
    found = get_course(session, slug=course)
    role = require_member(session, user=user, course=found)
    now = utcnow()
    labs = []
    for lab in labs_of(session, course=found):
        deadline = deadline_for(session, lab=lab, user_id=user.id)
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
                max_score=lab.max_score,
                open=lab_state(lab, deadline, now=now, staff=role.is_staff).accepts,
                submit_url=f"/api/v1/courses/{found.slug}/labs/{lab.slug}/submissions",
                submissions_remaining=submission_quota(
                    session, user=user, lab=lab, now=now
                ).remaining,
            )
        )
    return labs


@router.post("/courses/{course}/labs/{lab}/submissions", status_code=202, tags=["submissions"])
def submit(
    course: str,
    lab: str,
    file: Annotated[UploadFile, File(description="the .cu source file")],
    session: SessionDep,
    user: ApiUser,
    response: Response,
) -> SubmissionCreated:
    # A plain def, so FastAPI runs it in a worker thread: the database and the broker calls
    # below block, and a slow broker must hold up this request only, not the event loop.
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
    # The row must exist before the worker can be told about it.
    session.commit()
    send_job(submission_id=intake.submission.id, job_id=intake.job.id)
    now = utcnow()
    lab_row = session.get_one(Lab, intake.submission.lab_id)
    quota = submission_quota(session, user=user, lab=lab_row, now=now)
    response.headers.update(quota.headers(now))
    return SubmissionCreated(
        id=intake.submission.id, status=Status.queued, url=f"/submissions/{intake.submission.id}"
    )


@router.get("/submissions/{submission_id}", tags=["submissions"])
def get_submission(submission_id: RowId, session: SessionDep, user: ApiUser) -> SubmissionRead:
    submission = get_visible_submission(session, user=user, submission_id=submission_id)
    return submission_read(
        session, submission=submission, viewer_is_staff=is_staff_for(session, user, submission)
    )


@router.post("/submissions/{submission_id}/regrade", status_code=202, tags=["submissions"])
def regrade_submission(
    submission_id: RowId, session: SessionDep, user: ApiUser
) -> SubmissionCreated:
    """Staff: grade a submission again (e.g. once a GPU worker is up, or after a lab fix)."""
    submission = get_visible_submission(session, user=user, submission_id=submission_id)
    job = regrade(session, user=user, submission=submission, now=utcnow())
    session.commit()
    send_job(submission_id=submission.id, job_id=job.id)
    return SubmissionCreated(
        id=submission.id, status=Status.queued, url=f"/submissions/{submission.id}"
    )


@router.get("/courses/{course}/submissions", tags=["submissions"])
def list_submissions(
    course: str,
    session: SessionDep,
    user: ApiUser,
    lab: Annotated[str | None, Query(description="a lab slug")] = None,
    student: Annotated[str | None, Query(alias="user", description="a student's email")] = None,
) -> list[SubmissionListItem]:
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


@router.get(
    "/courses/{course}/gradebook.csv",
    tags=["gradebook"],
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/csv": {}}}},
)
def export_gradebook(
    course: str,
    session: SessionDep,
    user: ApiUser,
    format: Annotated[
        Literal["kernelgrader", "canvas"],
        Query(description="kernelgrader (default) or canvas (Canvas's gradebook import)"),
    ] = "kernelgrader",
) -> PlainTextResponse:
    found = get_course(session, slug=course)
    require_staff(session, user=user, course=found)
    canvas = format == "canvas"
    text = canvas_csv(session, course=found) if canvas else gradebook_csv(session, course=found)
    name = f"{found.slug}-gradebook{'-canvas' if canvas else ''}.csv"
    return PlainTextResponse(
        text,
        media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


@router.get(
    "/submissions/{submission_id}/source",
    tags=["submissions"],
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/plain": {}}}},
)
def submission_source(
    submission_id: RowId, session: SessionDep, user: ApiUser
) -> PlainTextResponse:
    """The submitted file as it was stored (its author and the course's staff)."""
    submission = get_visible_submission(session, user=user, submission_id=submission_id)
    name = submission.filename.replace('"', "_")
    ascii_name = name.encode("ascii", "replace").decode().replace("?", "_")
    return PlainTextResponse(
        submission.source_text,
        media_type="text/plain; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="{ascii_name}"; '
            f"filename*=UTF-8''{quote(name)}"
        },
    )
