"""REST endpoints for late days and the course's policies: what a student has left, the
staff's adjustments with a reason, and the instructors' budget, cap and regrade window."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy.orm import Session

from app.api.errors import COURSE, errors
from app.core.database import utcnow
from app.core.errors import Invalid
from app.courses.models import Course
from app.courses.service import get_course, require_instructor, require_member, require_staff
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
from app.policy.settle import adjust
from app.users.models import User
from app.users.service import get_user
from app.web.deps import ApiDb

router = APIRouter(prefix="/api/v1", tags=["late days"], responses=errors(*COURSE))

MAX_REGRADE_WINDOW_DAYS = 365


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


@router.get("/courses/{course}/late-days/me")
async def my_late_days(course: str, api: ApiDb) -> LateDaysRead:
    """Students: my late days: the budget, what I spent on which lab, what is left, and why."""

    def work(session: Session, user: User) -> LateDaysRead:
        found = get_course(session, slug=course)
        require_member(session, user=user, course=found)
        return late_days_read(session, found, user)

    return await api.run(work)


@router.get("/courses/{course}/late-days")
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


@router.get("/courses/{course}/late-days/{email}")
async def student_late_days(course: str, email: str, api: ApiDb) -> LateDaysRead:
    """Staff: one student's late days, per lab, with their history."""

    def work(session: Session, user: User) -> LateDaysRead:
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        return late_days_read(session, found, get_user(session, email=email))

    return await api.run(work)


@router.post("/courses/{course}/late-days/{email}/adjustments")
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


def set_regrade_window(course: Course, days: int) -> list[str]:
    if days < 0 or days > MAX_REGRADE_WINDOW_DAYS:
        raise Invalid(
            f"The regrade window is 0 to {MAX_REGRADE_WINDOW_DAYS} days after grades are "
            f"released; {days} is not."
        )
    if days == course.regrade_window_days:
        return []
    course.regrade_window_days = days
    return [f"takes regrade requests until {days} days after a lab's grades are released"]


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


@router.get("/courses/{course}/policies", tags=["courses"])
async def get_policies(course: str, api: ApiDb) -> CoursePoliciesRead:
    """Members: the course's late days per student, per-lab cap and regrade window."""

    def work(session: Session, user: User) -> CoursePoliciesRead:
        found = get_course(session, slug=course)
        require_member(session, user=user, course=found)
        return policies_read(session, found, [])

    return await api.run(work)


@router.patch("/courses/{course}/policies", tags=["courses"])
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
