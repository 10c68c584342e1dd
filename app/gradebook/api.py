"""The gradebook's API: the gradebook as CSV (its own layout, or the one Canvas imports), a
lab's roster of students, and its counted sources as a zip.
"""

from __future__ import annotations

from datetime import datetime
from typing import IO, Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel
from sqlalchemy.orm import Session

from app.api.errors import COURSE, errors
from app.core.database import utcnow
from app.core.spool import chunks_of, new_spool, text_spool
from app.courses.service import (
    find_lab,
    get_course,
    require_staff,
)
from app.gradebook.lab_roster import counted_sources_zip, lab_roster
from app.gradebook.service import write_canvas_csv, write_gradebook_csv
from app.rubric.service import points_possible
from app.submissions.models import Status
from app.users.models import User
from app.web.deps import ApiDb

router = APIRouter(prefix="/api/v1")


@router.get(
    "/courses/{course}/gradebook.csv",
    tags=["gradebook"],
    response_class=StreamingResponse,
    responses={200: {"content": {"text/csv": {}}}, **errors(*COURSE)},
)
async def export_gradebook(
    course: str,
    api: ApiDb,
    format: Annotated[
        Literal["kernelgrader", "canvas"],
        Query(description="kernelgrader (default) or canvas (Canvas's gradebook import)"),
    ] = "kernelgrader",
) -> StreamingResponse:
    canvas = format == "canvas"
    write = write_canvas_csv if canvas else write_gradebook_csv

    def work(session: Session, user: User) -> tuple[str, IO[bytes]]:
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        return found.slug, text_spool(lambda out: write(session, course=found, out=out))

    slug, spool = await api.run(work)
    name = f"{slug}-gradebook{'-canvas' if canvas else ''}.csv"
    return StreamingResponse(
        chunks_of(spool),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


class StudentRowRead(BaseModel):
    email: str
    name: str
    score: float | None
    max_score: float  # the autograde's points and the rubric's (points_possible)
    counted_submission: int | None
    pending: int
    attempts: int
    last_submission: int | None
    last_status: Status | None
    last_at: datetime | None
    late: bool
    due_at: datetime | None
    extension: bool
    kernel_ms: float | None
    gpu: str | None


@router.get("/courses/{course}/labs/{lab}/students", tags=["labs"], responses=errors(*COURSE))
async def lab_students(
    course: str,
    lab: str,
    api: ApiDb,
    status: Annotated[
        str | None, Query(description="none, pending, scored, full or not_full")
    ] = None,
    late: Annotated[bool | None, Query(description="the counted submission is late")] = None,
    extension: Annotated[bool | None, Query(description="has an extension")] = None,
    q: Annotated[str | None, Query(description="part of a name or email")] = None,
) -> list[StudentRowRead]:
    """Staff: one row per enrolled student with the counted score, attempts, the last
    submission and its status, lateness and extension."""

    def work(session: Session, user: User) -> list[StudentRowRead]:
        found, row = find_lab(session, course=course, lab=lab)
        require_staff(session, user=user, course=found)
        rows = lab_roster(session, lab=row, status=status, late=late, extension=extension, query=q)
        most = points_possible(session, labs=[row])[row.id]
        return [
            StudentRowRead(
                email=r.student.email,
                name=r.student.name,
                score=r.cell.score,
                max_score=most,
                counted_submission=r.counted.id if r.counted else None,
                pending=r.cell.pending,
                attempts=r.attempts,
                last_submission=r.last.id if r.last else None,
                last_status=Status(r.last.status) if r.last else None,
                last_at=r.last.created_at if r.last else None,
                late=r.late,
                due_at=r.deadline.due_at,
                extension=r.deadline.extended,
                kernel_ms=r.timed.median_ms if r.timed else None,
                gpu=r.timed.gpu_model if r.timed else None,
            )
            for r in rows
        ]

    return await api.run(work)


@router.get(
    "/courses/{course}/labs/{lab}/submissions.zip",
    tags=["labs"],
    response_class=StreamingResponse,
    responses={200: {"content": {"application/zip": {}}}, **errors(*COURSE)},
)
async def lab_sources_zip(course: str, lab: str, api: ApiDb) -> StreamingResponse:
    """Staff: each student's counted submission (their latest where none counts yet), a folder
    per student, with manifest.csv: ready for a plagiarism checker."""

    def work(session: Session, user: User) -> tuple[str, IO[bytes]]:
        found, row = find_lab(session, course=course, lab=lab)
        require_staff(session, user=user, course=found)
        spool = new_spool()
        try:
            counted_sources_zip(session, lab=row, now=utcnow(), out=spool)
        except BaseException:
            spool.close()
            raise
        spool.seek(0)
        return f"{found.slug}-{row.slug}-counted.zip", spool

    name, spool = await api.run(work)
    return StreamingResponse(
        chunks_of(spool),
        media_type="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )
