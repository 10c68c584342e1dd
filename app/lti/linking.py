"""Linking an LMS course (a launch's context) to a kernelgrader course: an explicit act, per
LMS course, of an instructor of that kernelgrader course.

It starts from a launch by someone the LMS calls an instructor of the LMS course; they then
log in to kernelgrader with their own account and pick a course they teach there (or make a
new one). From then on the LMS course's links, roster and roles act in that course alone:
the registration vouches for who is in the LMS course, the instructor for which course it
opens. Unlinking is theirs too, on the course's LMS page.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.errors import Conflict, Forbidden, NotFound
from app.courses.models import Course, Enrollment, Role
from app.courses.service import RESERVED_SLUGS, create_course, enroll, get_course
from app.lti.models import LtiContext, LtiPlatform
from app.users.models import User


def staff_courses(session: Session, *, user: User) -> list[Course]:
    """Courses a person may link an LMS course to: those they teach, not archived."""
    return list(
        session.scalars(
            select(Course)
            .join(Enrollment, Enrollment.course_id == Course.id)
            .where(
                Enrollment.user_id == user.id,
                Enrollment.role == Role.instructor.value,
                Course.archived_at.is_(None),
            )
            .order_by(Course.slug)
        )
    )


def link(session: Session, *, pending: dict[str, Any], user: User, course_slug: str) -> LtiContext:
    """Link the pending launch's LMS course to `course_slug`, which `user` teaches, or to a new
    course (`course_slug` "new": named after the LMS course, with them as its instructor)."""
    platform = session.get(LtiPlatform, pending["platform_id"])
    if platform is None:
        raise NotFound("This LMS's registration was removed; ask the site administrator.")
    title = str(pending["context"].get("title") or pending["context"]["id"])
    if course_slug == "new":
        course = create_course(session, slug=_free_slug(session, title), title=title[:200])
        enroll(session, user=user, course=course, role=Role.instructor)
    else:
        course = get_course(session, slug=course_slug)
        if course not in staff_courses(session, user=user):
            raise Forbidden(
                f"Only an instructor of {course.slug} can link an LMS course to it; pick a "
                "course you teach."
            )
    context = session.scalar(
        select(LtiContext).where(
            LtiContext.platform_id == platform.id,
            LtiContext.deployment_id == pending["deployment_id"],
            LtiContext.context_id == pending["context"]["id"],
        )
    )
    if context is None:
        context = LtiContext(
            platform_id=platform.id,
            deployment_id=pending["deployment_id"],
            context_id=pending["context"]["id"],
        )
        session.add(context)
    elif context.course_id is not None and context.course_id != course.id:
        other = session.get_one(Course, context.course_id)
        raise Conflict(
            f"This LMS course opens {other.slug} already; an instructor of {other.slug} "
            "unlinks it first, on that course's LMS page."
        )
    context.course_id = course.id
    context.title = title[:500]
    services = pending["services"]
    context.memberships_url = services["memberships_url"] or context.memberships_url
    if services["lineitems_url"]:
        context.lineitems_url = services["lineitems_url"]
        context.ags_scopes = services["ags_scopes"]
    session.flush()
    return context


def unlink(session: Session, *, course: Course, context_id: int) -> LtiContext:
    """The LMS course no longer opens this course (its grade columns stay known, should it
    be linked again)."""
    context = session.get(LtiContext, context_id)
    if context is None or context.course_id != course.id:
        raise NotFound("That LMS course is not linked to this course.")
    context.course_id = None
    session.flush()
    return context


def _free_slug(session: Session, title: str) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:50] or "lms-course"
    if not base[0].isalnum():
        base = "c" + base
    slug, n = base, 1
    while slug in RESERVED_SLUGS or session.scalar(select(Course.id).where(Course.slug == slug)):
        n += 1
        slug = f"{base}-{n}"
    return slug
