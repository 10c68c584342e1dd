"""REST endpoints for running a course: lab settings, extensions, the staff's view of a lab,
its counted sources, regrading a whole lab, and the leaderboard.

As everywhere in the API, a handler's database work is one function handed to `api.run`.
"""

from __future__ import annotations

from datetime import datetime
from typing import IO, Annotated

from fastapi import APIRouter, Query, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from app.api.errors import COURSE, errors
from app.core.database import utcnow
from app.core.errors import NotFound
from app.core.spool import chunks_of, new_spool
from app.courses.extensions import ExtensionRow, extensions_of
from app.courses.models import Course, Lab, LatePolicy, ScorePolicy
from app.courses.release import released_at
from app.courses.service import (
    KEEP,
    archive_lab,
    find_lab,
    get_course,
    get_lab,
    require_instructor,
    require_member,
    require_staff,
    reread_lab,
    restore_lab,
)
from app.gradebook.lab_roster import counted_sources_zip, lab_roster
from app.grading.bulk import regrade_lab
from app.performance.leaderboard import join_leaderboard, leaderboard, leave_leaderboard
from app.policy.rules import grant_extension, revoke_extension, update_lab, update_lab_policies
from app.submissions.models import Status
from app.users.models import User
from app.users.service import get_user
from app.web.deps import ApiDb

router = APIRouter(prefix="/api/v1")


class LabSettings(BaseModel):
    """Fields to change; a field left out stays as it is, a date sent as null is cleared."""

    release_at: datetime | None = None
    due_at: datetime | None = None
    late_policy: LatePolicy | None = None
    score_policy: ScorePolicy | None = None
    archived: bool | None = Field(None, description="false restores a removed lab")
    team_size: int | None = Field(None, description="most students in a team (1: alone)")
    late_day_cap: int | None = Field(
        None, description="most late days on this lab; null: the course's cap"
    )
    late_penalty: float | None = Field(
        None, description="percent of the score lost per late day not covered (0 to 100)"
    )
    grades_released_at: datetime | None = Field(
        None, description="when students see hidden details and rubric points; null: default"
    )


class LabSettingsRead(BaseModel):
    slug: str
    title: str
    release_at: datetime | None
    due_at: datetime | None
    late_policy: str
    score_policy: str
    max_score: float
    archived_at: datetime | None
    # The content digest of the lab folder as last checked and read (graders LabSpec.digest).
    digest: str = ""
    team_size: int = 1
    late_day_cap: int | None = None
    late_penalty: float = 0.0
    grades_released_at: datetime | None = None
    # When the grades are (or will be) released: the set time, or the due date and cap.
    released_at: datetime | None = None
    changes: list[str] = []


class ExtensionGrant(BaseModel):
    until: datetime = Field(description="the student's own due date (UTC if no offset)")
    note: str = ""


class ExtensionRead(BaseModel):
    lab: str
    student: str
    until: datetime
    lab_due_at: datetime | None
    granted_by: str | None
    note: str
    created_at: datetime


class StudentRowRead(BaseModel):
    email: str
    name: str
    score: float | None
    max_score: float
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


class BulkRegradeRead(BaseModel):
    queued: int
    skipped: int
    # Of the queued: last graded against another version of the lab, or before versions were
    # recorded; and the lab's version (content digest) they are graded against now.
    older_version: int = 0
    unrecorded_version: int = 0
    lab_digest: str = ""


class LeaderboardPlace(BaseModel):
    rank: int
    pseudonym: str
    median_ms: float
    you: bool


class LeaderboardRead(BaseModel):
    gpu: str
    places: list[LeaderboardPlace]


class LeaderboardJoin(BaseModel):
    pseudonym: str = Field(description="3 to 24 letters, digits, spaces, dots or hyphens")


def _aware(value: datetime | None) -> datetime | None:
    from datetime import UTC

    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _settings_read(session: Session, lab: Lab, changes: list[str] | None = None) -> LabSettingsRead:
    return LabSettingsRead(
        team_size=lab.team_size,
        late_day_cap=lab.late_day_cap,
        late_penalty=lab.late_penalty,
        grades_released_at=lab.grades_released_at,
        released_at=released_at(session.get_one(Course, lab.course_id), lab),
        slug=lab.slug,
        title=lab.title,
        release_at=lab.release_at,
        due_at=lab.due_at,
        late_policy=lab.late_policy,
        score_policy=lab.score_policy,
        max_score=lab.max_score,
        archived_at=lab.archived_at,
        digest=lab.digest,
        changes=changes or [],
    )


@router.patch("/courses/{course}/labs/{lab}", tags=["labs"], responses=errors(*COURSE))
async def patch_lab(course: str, lab: str, body: LabSettings, api: ApiDb) -> LabSettingsRead:
    """Instructors: change a lab's dates and policies (late flags follow a new due date; team
    size, late-day cap, late penalty, the grades' release), or
    restore a removed lab with `"archived": false`. The lab's folder is read again first: where
    it changed, it is checked (422 with the failed checks, nothing saved) and its points, title
    and version recorded."""

    def work(session: Session, user: User) -> LabSettingsRead:
        found, row = find_lab(session, course=course, lab=lab)
        require_instructor(session, user=user, course=found)
        given = body.model_fields_set
        changes = reread_lab(session, lab=row)
        changes += update_lab(
            session,
            lab=row,
            release_at=_aware(body.release_at) if "release_at" in given else KEEP,
            due_at=_aware(body.due_at) if "due_at" in given else KEEP,
            late_policy=body.late_policy,
            score_policy=body.score_policy,
        )
        if body.archived is True and archive_lab(session, lab=row, now=utcnow()):
            changes.append("removed")
        if body.archived is False and restore_lab(session, lab=row):
            changes.append("restored")
        changes += update_lab_policies(
            session,
            lab=row,
            now=utcnow(),
            team_size=body.team_size,
            late_day_cap=body.late_day_cap if "late_day_cap" in given else KEEP,
            late_penalty=body.late_penalty,
            grades_released_at=_aware(body.grades_released_at)
            if "grades_released_at" in given
            else KEEP,
        )
        return _settings_read(session, row, changes)

    return await api.run(work)


@router.delete("/courses/{course}/labs/{lab}", tags=["labs"], responses=errors(*COURSE))
async def remove_lab(course: str, lab: str, api: ApiDb) -> LabSettingsRead:
    """Instructors: remove (archive) a lab; its submissions stay, PATCH archived=false
    restores it."""

    def work(session: Session, user: User) -> LabSettingsRead:
        found, row = find_lab(session, course=course, lab=lab)
        require_instructor(session, user=user, course=found)
        archive_lab(session, lab=row, now=utcnow())
        return _settings_read(session, row, ["removed"])

    return await api.run(work)


def _extension_read(row: ExtensionRow) -> ExtensionRead:
    return ExtensionRead(
        lab=row.lab.slug,
        student=row.student.email,
        until=row.extension.due_at,
        lab_due_at=row.lab.due_at,
        granted_by=row.granted_by.email if row.granted_by else None,
        note=row.extension.note,
        created_at=row.extension.created_at,
    )


@router.get("/courses/{course}/extensions", tags=["extensions"], responses=errors(*COURSE))
async def list_extensions(
    course: str,
    api: ApiDb,
    lab: Annotated[str | None, Query(description="only this lab")] = None,
) -> list[ExtensionRead]:
    """Staff: the course's extensions."""

    def work(session: Session, user: User) -> list[ExtensionRead]:
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        only = get_lab(session, course=found, slug=lab) if lab else None
        return [_extension_read(r) for r in extensions_of(session, course=found, lab=only)]

    return await api.run(work)


@router.put(
    "/courses/{course}/labs/{lab}/extensions/{email}",
    tags=["extensions"],
    responses=errors(*COURSE),
)
async def put_extension(
    course: str, lab: str, email: str, body: ExtensionGrant, api: ApiDb
) -> ExtensionRead:
    """Staff: give a student their own due date for a lab (replaces an earlier one)."""

    def work(session: Session, user: User) -> ExtensionRead:
        found, row = find_lab(session, course=course, lab=lab)
        require_staff(session, user=user, course=found)
        student = get_user(session, email=email)
        until = _aware(body.until)
        assert until is not None
        grant_extension(
            session,
            course=found,
            lab=row,
            student=student,
            due_at=until,
            granted_by=user,
            note=body.note,
        )
        (granted,) = [
            r for r in extensions_of(session, course=found, lab=row) if r.student.id == student.id
        ]
        return _extension_read(granted)

    return await api.run(work)


@router.delete(
    "/courses/{course}/labs/{lab}/extensions/{email}",
    status_code=204,
    tags=["extensions"],
    responses=errors(*COURSE),
)
async def delete_extension(course: str, lab: str, email: str, api: ApiDb) -> Response:
    """Staff: take an extension back; the lab's due date applies again."""

    def work(session: Session, user: User) -> Response:
        found, row = find_lab(session, course=course, lab=lab)
        require_staff(session, user=user, course=found)
        if not revoke_extension(session, lab=row, student=get_user(session, email=email)):
            raise NotFound(f"{email} has no extension for {lab}.")
        return Response(status_code=204)

    return await api.run(work)


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
        return [
            StudentRowRead(
                email=r.student.email,
                name=r.student.name,
                score=r.cell.score,
                max_score=row.max_score,
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


@router.post(
    "/courses/{course}/labs/{lab}/regrade",
    status_code=202,
    tags=["labs"],
    responses=errors(*COURSE),
)
async def regrade_whole_lab(
    course: str,
    lab: str,
    api: ApiDb,
    counted_only: Annotated[bool, Query(description="only each student's counted one")] = False,
) -> BulkRegradeRead:
    """Staff: regrade every submission of a lab (after fixing it). The jobs wait behind
    students' new uploads and go to the workers a few at a time."""

    def work(session: Session, user: User) -> BulkRegradeRead:
        found, row = find_lab(session, course=course, lab=lab)
        require_staff(session, user=user, course=found)
        result = regrade_lab(
            session, lab=row, requested_by=user.email, now=utcnow(), counted_only=counted_only
        )
        return BulkRegradeRead(
            queued=result.queued,
            skipped=result.skipped,
            older_version=result.older,
            unrecorded_version=result.unrecorded,
            lab_digest=result.digest,
        )

    return await api.run(work)


@router.get(
    "/courses/{course}/labs/{lab}/leaderboard", tags=["leaderboard"], responses=errors(*COURSE)
)
async def get_leaderboard(course: str, lab: str, api: ApiDb) -> list[LeaderboardRead]:
    """Members: per GPU model, the opted-in students' fastest fully correct submissions, by
    the timed case's median."""

    def work(session: Session, user: User) -> list[LeaderboardRead]:
        found, row = find_lab(session, course=course, lab=lab)
        require_member(session, user=user, course=found)
        return [
            LeaderboardRead(
                gpu=board.gpu_model,
                places=[
                    LeaderboardPlace(
                        rank=p.rank, pseudonym=p.pseudonym, median_ms=p.median_ms, you=p.is_you
                    )
                    for p in board.places
                ],
            )
            for board in leaderboard(session, lab=row, viewer_id=user.id)
        ]

    return await api.run(work)


@router.put(
    "/courses/{course}/labs/{lab}/leaderboard/me",
    tags=["leaderboard"],
    responses=errors(401, 403, 404, 409, 503),
)
async def join_lab_leaderboard(
    course: str, lab: str, body: LeaderboardJoin, api: ApiDb
) -> LeaderboardJoin:
    """Students: appear on the lab's leaderboard under a pseudonym (or change it)."""

    def work(session: Session, user: User) -> LeaderboardJoin:
        found, row = find_lab(session, course=course, lab=lab)
        entry = join_leaderboard(
            session, course=found, lab=row, user=user, pseudonym=body.pseudonym
        )
        return LeaderboardJoin(pseudonym=entry.pseudonym)

    return await api.run(work)


@router.delete(
    "/courses/{course}/labs/{lab}/leaderboard/me",
    status_code=204,
    tags=["leaderboard"],
    responses=errors(*COURSE),
)
async def leave_lab_leaderboard(course: str, lab: str, api: ApiDb) -> Response:
    """Students: leave the lab's leaderboard."""

    def work(session: Session, user: User) -> Response:
        found, row = find_lab(session, course=course, lab=lab)
        require_member(session, user=user, course=found)
        leave_leaderboard(session, lab=row, user=user)
        return Response(status_code=204)

    return await api.run(work)
