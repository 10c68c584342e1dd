"""The rubric's API: a lab's rubric items and comments, and a student's points."""

from __future__ import annotations

from fastapi import APIRouter, Response
from sqlalchemy.orm import Session

from app.api.errors import COURSE, errors
from app.core.database import utcnow
from app.core.errors import Forbidden
from app.courses.models import Course, Lab
from app.courses.release import is_released
from app.courses.service import (
    find_lab,
    require_instructor,
    require_member,
    require_staff,
    role_in,
)
from app.rubric import service as rubric
from app.rubric.schemas import (
    RubricCommentCreate,
    RubricGradesRead,
    RubricGradesSet,
    RubricItemCreate,
    RubricItemRead,
    RubricItemUpdate,
    RubricScoreRead,
)
from app.users.models import User
from app.users.service import get_user
from app.web.deps import ApiDb, RowId

router = APIRouter(prefix="/api/v1", responses=errors(*COURSE))


def _item_reads(session: Session, lab: Lab, *, comments: bool) -> list[RubricItemRead]:
    by_item = rubric.comments_of(session, lab=lab) if comments else {}
    return [
        RubricItemRead(
            id=i.id,
            title=i.title,
            description=i.description,
            max_points=i.max_points,
            comments=[c.text for c in by_item.get(i.id, [])],
        )
        for i in rubric.items_of(session, lab=lab)
    ]


@router.get("/courses/{course}/labs/{lab}/rubric", tags=["rubric"])
async def get_rubric(course: str, lab: str, api: ApiDb) -> list[RubricItemRead]:
    """Members: the lab's staff-graded items and their points (staff also get the reusable
    comments)."""

    def work(session: Session, user: User) -> list[RubricItemRead]:
        found, row = find_lab(session, course=course, lab=lab)
        role = require_member(session, user=user, course=found)
        return _item_reads(session, row, comments=role.is_staff)

    return await api.run(work)


@router.post("/courses/{course}/labs/{lab}/rubric/items", status_code=201, tags=["rubric"])
async def add_rubric_item(
    course: str, lab: str, body: RubricItemCreate, api: ApiDb
) -> list[RubricItemRead]:
    """Instructors: add a staff-graded item (its points are added to the lab's)."""

    def work(session: Session, user: User) -> list[RubricItemRead]:
        found, row = find_lab(session, course=course, lab=lab)
        require_instructor(session, user=user, course=found)
        rubric.add_item(
            session,
            lab=row,
            title=body.title,
            max_points=body.max_points,
            description=body.description,
        )
        return _item_reads(session, row, comments=True)

    return await api.run(work)


@router.patch("/courses/{course}/labs/{lab}/rubric/items/{item_id}", tags=["rubric"])
async def update_rubric_item(
    course: str, lab: str, item_id: RowId, body: RubricItemUpdate, api: ApiDb
) -> list[RubricItemRead]:
    """Instructors: change an item's title, points or description (the lab's maximum follows;
    points below what a student already has on it are refused)."""

    def work(session: Session, user: User) -> list[RubricItemRead]:
        found, row = find_lab(session, course=course, lab=lab)
        require_instructor(session, user=user, course=found)
        rubric.update_item(
            session,
            lab=row,
            item_id=item_id,
            title=body.title,
            max_points=body.max_points,
            description=body.description,
        )
        return _item_reads(session, row, comments=True)

    return await api.run(work)


@router.delete(
    "/courses/{course}/labs/{lab}/rubric/items/{item_id}", status_code=204, tags=["rubric"]
)
async def remove_rubric_item(course: str, lab: str, item_id: RowId, api: ApiDb) -> Response:
    """Instructors: remove an item and every student's points on it."""

    def work(session: Session, user: User) -> Response:
        found, row = find_lab(session, course=course, lab=lab)
        require_instructor(session, user=user, course=found)
        rubric.remove_item(session, lab=row, item_id=item_id)
        return Response(status_code=204)

    return await api.run(work)


@router.post(
    "/courses/{course}/labs/{lab}/rubric/items/{item_id}/comments",
    status_code=201,
    tags=["rubric"],
)
async def add_rubric_comment(
    course: str, lab: str, item_id: RowId, body: RubricCommentCreate, api: ApiDb
) -> list[RubricItemRead]:
    """Staff: a reusable comment for an item."""

    def work(session: Session, user: User) -> list[RubricItemRead]:
        found, row = find_lab(session, course=course, lab=lab)
        require_staff(session, user=user, course=found)
        rubric.add_comment(
            session,
            item=rubric.get_item(session, lab=row, item_id=item_id),
            text=body.text,
            by=user,
        )
        return _item_reads(session, row, comments=True)

    return await api.run(work)


def _grades_read(session: Session, course: Course, lab: Lab, student: User) -> RubricGradesRead:
    grades = rubric.grades_of(session, lab=lab, user_id=student.id)
    given = [g.score.points for g in grades if g.score is not None]
    return RubricGradesRead(
        student=student.email,
        released=is_released(course, lab, now=utcnow()),
        total=sum(given) if given else None,
        scores=[
            RubricScoreRead(
                item=g.item.id,
                title=g.item.title,
                max_points=g.item.max_points,
                points=g.score.points if g.score else None,
                comment=g.score.comment if g.score else "",
                updated_at=g.score.updated_at if g.score else None,
            )
            for g in grades
        ],
    )


@router.get("/courses/{course}/labs/{lab}/rubric/grades/{email}", tags=["rubric"])
async def get_rubric_grades(course: str, lab: str, email: str, api: ApiDb) -> RubricGradesRead:
    """Staff: a student's rubric points; the student themself once the grades are released."""

    def work(session: Session, user: User) -> RubricGradesRead:
        found, row = find_lab(session, course=course, lab=lab)
        student = get_user(session, email=email)
        role = role_in(session, user=user, course=found)
        staff = role is not None and role.is_staff
        if not staff:
            if student.id != user.id or role is None:
                raise Forbidden("Only the course's staff may see another student's rubric points.")
            if not is_released(found, row, now=utcnow()):
                raise Forbidden(
                    f"The grades of {row.slug} are not released yet; your rubric points show "
                    "once they are."
                )
        return _grades_read(session, found, row, student)

    return await api.run(work)


@router.put("/courses/{course}/labs/{lab}/rubric/grades/{email}", tags=["rubric"])
async def set_rubric_grades(
    course: str, lab: str, email: str, body: RubricGradesSet, api: ApiDb
) -> RubricGradesRead:
    """Staff: a student's points (and comment) per item; null points clear an item."""

    def work(session: Session, user: User) -> RubricGradesRead:
        found, row = find_lab(session, course=course, lab=lab)
        require_staff(session, user=user, course=found)
        student = get_user(session, email=email)
        rubric.grade(
            session,
            course=found,
            lab=row,
            student=student,
            scores={s.item: (s.points, s.comment) for s in body.scores},
            by=user,
            now=utcnow(),
        )
        return _grades_read(session, found, row, student)

    return await api.run(work)
