"""The course role an LMS gives a person, and how it lands in the one course the LMS course is
linked to.

Only the launch's context roles count (`.../membership#Instructor`, the sub-role
`.../membership/Instructor#TeachingAssistant`, LTI 1.1's `urn:lti:role:ims/lis/...`, and the
simple names LTI 1.3 still allows for context roles). Institution and system roles say what a
person is somewhere in the LMS's institution (Canvas sends `institution/person#Instructor` to
anyone who teaches any course), not in this course, so they give nothing here.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.courses.models import Course, Enrollment, Role
from app.courses.service import enroll
from app.users.models import User

MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership"
LTI11_CONTEXT = "urn:lti:role:ims/lis/"
INSTRUCTING = {"Instructor", "Administrator", "ContentDeveloper"}


def _context_role(uri: object) -> tuple[str, str] | None:
    """(principal, sub-role) of a context role; None for any other kind of role."""
    text = str(uri).strip()
    if text.startswith(MEMBERSHIP + "#"):
        return text[len(MEMBERSHIP) + 1 :], ""
    if text.startswith(MEMBERSHIP + "/"):
        principal, _, sub = text[len(MEMBERSHIP) + 1 :].partition("#")
        return principal, sub
    if text.startswith(LTI11_CONTEXT):
        principal, _, sub = text[len(LTI11_CONTEXT) :].partition("/")
        return principal, sub
    if text and not any(mark in text for mark in ":/#"):
        return text, ""  # a simple name: only context roles have them
    return None


def role_from(claims: list[str]) -> Role | None:
    """The course role the launch's (or a roster member's) context roles give, or None.

    A sub-role narrows its principal: `membership/Instructor#TeachingAssistant` is a TA,
    even beside the `membership#Instructor` platforms send with it."""
    roles = [found for claim in claims if (found := _context_role(claim)) is not None]
    if any(
        principal.startswith("TeachingAssistant") or sub.startswith("TeachingAssistant")
        for principal, sub in roles
    ):
        return Role.ta
    principals = {principal for principal, _ in roles}
    if principals & INSTRUCTING:
        return Role.instructor
    if "Learner" in principals:
        return Role.student
    return None


def apply_role(session: Session, *, user: User, course: Course, role: Role) -> Role:
    """Enrol with the LMS's role in the linked course; an LMS never demotes the course's last
    instructor (that would leave nobody to manage it). Returns the role they now have."""
    row = session.scalar(
        select(Enrollment)
        .where(Enrollment.user_id == user.id, Enrollment.course_id == course.id)
        .with_for_update()
    )
    if row is not None and row.role == Role.instructor.value and role is not Role.instructor:
        instructors = session.scalar(
            select(func.count())
            .select_from(Enrollment)
            .where(Enrollment.course_id == course.id, Enrollment.role == Role.instructor.value)
        )
        if (instructors or 0) <= 1:
            return Role.instructor
    enroll(session, user=user, course=course, role=role)
    return role
