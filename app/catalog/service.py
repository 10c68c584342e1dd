"""Copying a course to a new term: what carries over (its labs, their settings and policies,
rubric items and their comments, the course's late-day and regrade policies) and what does not
(people, teams, submissions, grades, extensions, LMS links, and every date, which the new
term's staff set)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.courses.lifecycle import create_course_for
from app.courses.models import Course, Lab
from app.courses.service import labs_of, require_instructor
from app.rubric.models import RubricComment, RubricItem
from app.users.models import User

# A lab's columns that are its settings and policies, copied as they are; its dates, grade
# release and removal are the old term's, and left empty.
LAB_SETTINGS = (
    "slug",
    "title",
    "builtin_id",
    "folder",
    "score_policy",
    "late_policy",
    "max_score",
    "gpu_model",
    "digest",
    "team_size",
    "late_day_cap",
    "late_penalty",
)


@dataclass(frozen=True)
class Copied:
    course: Course
    labs: int
    rubric_items: int


def copy_course(
    session: Session,
    *,
    source: Course,
    slug: str,
    title: str,
    instructor: User,
    maker: User | None = None,
) -> Copied:
    """A new course for the next term, with `instructor` as its only member. `maker` (a web
    request's account) must teach `source` and be allowed to make courses; None for the CLI's
    operator. Removed labs stay behind."""
    if maker is not None:
        require_instructor(session, user=maker, course=source)
    course = create_course_for(session, slug=slug, title=title, instructor=instructor, maker=maker)
    course.late_days = source.late_days
    course.late_day_cap = source.late_day_cap
    course.regrade_window_days = source.regrade_window_days
    labs = labs_of(session, course=source)
    items = 0
    for position, old in enumerate(labs, start=1):
        lab = Lab(
            course_id=course.id,
            position=position,
            **{name: getattr(old, name) for name in LAB_SETTINGS},
        )
        session.add(lab)
        session.flush()
        items += _copy_rubric(session, old=old, new=lab)
    session.flush()
    return Copied(course=course, labs=len(labs), rubric_items=items)


def _copy_rubric(session: Session, *, old: Lab, new: Lab) -> int:
    """The lab's rubric items and their reusable comments (no student's points)."""
    items = list(
        session.scalars(
            select(RubricItem)
            .where(RubricItem.lab_id == old.id)
            .order_by(RubricItem.position, RubricItem.id)
        )
    )
    for item in items:
        copy = RubricItem(
            lab_id=new.id,
            position=item.position,
            title=item.title,
            description=item.description,
            max_points=item.max_points,
        )
        session.add(copy)
        session.flush()
        for comment in session.scalars(
            select(RubricComment).where(RubricComment.item_id == item.id).order_by(RubricComment.id)
        ):
            session.add(RubricComment(item_id=copy.id, text=comment.text))
    return len(items)
