"""A course's life: made (by whom), archived when its term is over, restored.

Who may make a course: a site administrator, or an instructor of some course. Making one gives
power over that new, empty course alone (its maker is its instructor); nothing in it reaches
another course, so one course's staff gain nothing over another by making courses. The CLI's
operator may make any course, for any account (`kernelgrader course create --instructor`).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.errors import Forbidden
from app.courses.models import Course, Enrollment, Role
from app.courses.service import create_course, enroll
from app.users.models import User


def may_create_courses(session: Session, *, user: User) -> bool:
    """A site administrator, or an instructor of some course (archived ones too)."""
    if user.is_site_admin:
        return True
    return bool(
        session.scalar(
            select(Enrollment.id)
            .where(Enrollment.user_id == user.id, Enrollment.role == Role.instructor.value)
            .limit(1)
        )
    )


def require_course_maker(session: Session, *, user: User) -> None:
    if not may_create_courses(session, user=user):
        raise Forbidden(
            "Only instructors and site administrators may make a course; ask an instructor "
            "of your course, or the site administrator, to make it and add you."
        )


def create_course_for(
    session: Session, *, slug: str, title: str, instructor: User, maker: User | None = None
) -> Course:
    """A new course with `instructor` as its instructor; `maker` (a web request's account)
    must be allowed to make courses, None for the CLI's operator."""
    if maker is not None:
        require_course_maker(session, user=maker)
    course = create_course(session, slug=slug, title=title)
    enroll(session, user=instructor, course=course, role=Role.instructor)
    return course


def archive_course(session: Session, *, course: Course, now: datetime) -> bool:
    """Take a course off everyone's list of courses and close it for uploads; everything in it
    stays. False when it was archived already."""
    if course.archived_at is not None:
        return False
    course.archived_at = now
    session.flush()
    return True


def restore_course(session: Session, *, course: Course) -> bool:
    if course.archived_at is None:
        return False
    course.archived_at = None
    session.flush()
    return True
