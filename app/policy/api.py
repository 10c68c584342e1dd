"""The API of the rules that move what counts: a lab's settings (dates, policies, removing it),
students' extensions, and a course's late days and policies.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from app.api.errors import COURSE, errors
from app.core.database import utcnow
from app.core.errors import NotFound
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
from app.latedays import service as latedays
from app.latedays.schemas import (
    CoursePolicies,
    CoursePoliciesRead,
    LateDayAdjust,
    LateDayEventRead,
    LateDaysRead,
    LateDaysRecountRead,
    LateDayUse,
)
from app.policy.recount import recount_after_change, recount_state
from app.policy.rules import (
    grant_extension,
    revoke_extension,
    set_regrade_window,
    update_lab,
    update_lab_policies,
)
from app.policy.settle import adjust
from app.users.models import User
from app.users.service import get_user
from app.web.deps import ApiDb

router = APIRouter(prefix="/api/v1")
# A course's late days and policies (their routes' tags and errors, as before they moved here).
late_days_router = APIRouter(prefix="/api/v1", tags=["late days"], responses=errors(*COURSE))


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


def _aware(value: datetime | None) -> datetime | None:
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


def late_days_read(session: Session, course: Course, student: User) -> LateDaysRead:
    balance = latedays.balance(session, course=course, user_id=student.id)
    return LateDaysRead(
        student=student.email,
        budget=balance.budget,
        adjusted=balance.adjusted,
        spent=balance.spent,
        held=balance.held,
        left=balance.left,
        per_lab_cap=course.late_day_cap,
        labs=[
            LateDayUse(
                lab=u.lab.slug,
                submission=u.charge.submission_id,
                days_late=u.charge.days_late,
                days_spent=u.charge.days,
            )
            for u in latedays.uses(session, course=course, user_id=student.id)
        ],
        history=[
            LateDayEventRead(
                at=e.at,
                kind=e.kind,
                delta=e.delta,
                remaining_after=e.remaining_after,
                lab=slug or None,
                reason=e.reason,
            )
            for e, slug in latedays.history(session, course=course, user_id=student.id)
        ],
    )


@late_days_router.get("/courses/{course}/late-days/me")
async def my_late_days(course: str, api: ApiDb) -> LateDaysRead:
    """Students: my late days: the budget, what I spent on which lab, what is left, and why."""

    def work(session: Session, user: User) -> LateDaysRead:
        found = get_course(session, slug=course)
        require_member(session, user=user, course=found)
        return late_days_read(session, found, user)

    return await api.run(work)


@late_days_router.get("/courses/{course}/late-days")
async def all_late_days(course: str, api: ApiDb) -> list[LateDaysRead]:
    """Staff: every student's late days (budget, adjustments, spent, left)."""

    def work(session: Session, user: User) -> list[LateDaysRead]:
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        return [
            LateDaysRead(
                student=row.student.email,
                budget=row.balance.budget,
                adjusted=row.balance.adjusted,
                spent=row.balance.spent,
                held=row.balance.held,
                left=row.balance.left,
                per_lab_cap=found.late_day_cap,
            )
            for row in latedays.balances(session, course=found)
        ]

    return await api.run(work)


@late_days_router.get("/courses/{course}/late-days/{email}")
async def student_late_days(course: str, email: str, api: ApiDb) -> LateDaysRead:
    """Staff: one student's late days, per lab, with their history."""

    def work(session: Session, user: User) -> LateDaysRead:
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        return late_days_read(session, found, get_user(session, email=email))

    return await api.run(work)


@late_days_router.post("/courses/{course}/late-days/{email}/adjustments")
async def adjust_late_days(
    course: str, email: str, body: LateDayAdjust, api: ApiDb
) -> LateDaysRead:
    """Staff: give a student late days (or take some away) with a reason they see. Days given
    cover labs still late beyond what they spent, earliest due first."""

    def work(session: Session, user: User) -> LateDaysRead:
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        student = get_user(session, email=email)
        adjust(
            session,
            course=found,
            student=student,
            delta=body.days,
            reason=body.reason,
            by=user,
            now=utcnow(),
        )
        return late_days_read(session, found, student)

    return await api.run(work)


def policies_read(session: Session, course: Course, changes: list[str]) -> CoursePoliciesRead:
    state = recount_state(session, course=course)
    return CoursePoliciesRead(
        course=course.slug,
        late_days=course.late_days,
        late_day_cap=course.late_day_cap,
        regrade_window_days=course.regrade_window_days,
        changes=changes,
        recount=None
        if state is None
        else LateDaysRecountRead(
            since=state.since, students_done=state.done, students=state.students
        ),
    )


@late_days_router.get("/courses/{course}/policies", tags=["courses"])
async def get_policies(course: str, api: ApiDb) -> CoursePoliciesRead:
    """Members: the course's late days per student, per-lab cap and regrade window."""

    def work(session: Session, user: User) -> CoursePoliciesRead:
        found = get_course(session, slug=course)
        require_member(session, user=user, course=found)
        return policies_read(session, found, [])

    return await api.run(work)


@late_days_router.patch("/courses/{course}/policies", tags=["courses"])
async def patch_policies(course: str, body: CoursePolicies, api: ApiDb) -> CoursePoliciesRead:
    """Instructors: the late days per student (0: none; never below what a student spent), the
    per-lab cap (null: none) and the regrade window. Late days are settled again for all, a
    few students at a time; in a large course the recount goes on after the answer, and
    `recount` says how far it got."""

    def work(session: Session, user: User) -> CoursePoliciesRead:
        found = get_course(session, slug=course)
        require_instructor(session, user=user, course=found)
        given = body.model_fields_set
        changes = []
        if body.regrade_window_days is not None:
            changes += set_regrade_window(found, body.regrade_window_days)
        changes += latedays.set_budget(
            session,
            course=found,
            days=body.late_days,
            cap=body.late_day_cap if "late_day_cap" in given else "keep",
            now=utcnow(),
        )
        # The change is committed first, then every student's late days are settled again
        # in short transactions of their own (app.policy.recount).
        session.commit()
        if found.late_days_recount_at is not None:
            recount_after_change(found.id)
        session.refresh(found)
        return policies_read(session, found, changes)

    return await api.run(work)
