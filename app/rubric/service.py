"""Rubric points on top of the autograde: a lab's staff-graded items (code quality, a short
report), reusable comments per item, and each student's points, which the gradebook adds to
the counted score. Students see theirs once the lab's grades are released
(app.courses.release). The items' points are part of the lab's maximum
(`points_possible`); every change here is passed on to those who follow it (`followers`: the
lab's LMS columns, app.lti.scores), which add themselves from above, so rubric imports none."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.database import as_dict
from app.core.errors import Invalid, NotFound
from app.courses.models import Course, Lab, Role
from app.courses.service import role_in
from app.rubric.models import RubricComment, RubricItem, RubricScore
from app.users.models import User

MAX_ITEM_POINTS = 1000.0
MAX_COMMENT = 500
MAX_ITEMS = 50

# Called after any change of a lab's items (user_id None: the lab's maximum changed for
# everyone) or of one student's points, in the changing transaction: app.lti.scores adds
# itself (follow_rubric), called by the web app and the CLI when they start.
Follower = Callable[..., None]
followers: list[Follower] = []


def _changed(session: Session, *, lab: Lab, user_id: int | None = None) -> None:
    for follower in followers:
        follower(session, lab=lab, user_id=user_id)


def points_possible(session: Session, *, labs: list[Lab]) -> dict[int, float]:
    """Each lab's maximum, the one every page, both CSVs and the LMS's column show: the
    autograde's points (lab.toml) plus its rubric items' (a cell's score adds both)."""
    totals = {lab.id: float(lab.max_score) for lab in labs}
    for lab_id, extra in session.execute(
        select(RubricItem.lab_id, func.sum(RubricItem.max_points))
        .where(RubricItem.lab_id.in_(list(totals) or [-1]))
        .group_by(RubricItem.lab_id)
    ):
        totals[lab_id] += float(extra or 0.0)
    return totals


@dataclass(frozen=True)
class ItemGrade:
    item: RubricItem
    score: RubricScore | None


def items_of(session: Session, *, lab: Lab) -> list[RubricItem]:
    return list(
        session.scalars(
            select(RubricItem)
            .where(RubricItem.lab_id == lab.id)
            .order_by(RubricItem.position, RubricItem.id)
        )
    )


def _checked(
    session: Session, *, lab: Lab, title: str, max_points: float, description: str, item_id: int
) -> str:
    """The item's title, tidied, once its fields pass (`item_id`: the item edited, or 0)."""
    name = " ".join(title.split())
    if not name or len(name) > 200:
        raise Invalid("A rubric item needs a title of 1 to 200 characters.")
    if not (0 < max_points <= MAX_ITEM_POINTS):
        raise Invalid(
            f"A rubric item is worth more than 0 and at most {MAX_ITEM_POINTS:g} points; "
            f"{max_points:g} is not."
        )
    if len(description) > 4000:
        raise Invalid("The description is longer than 4000 characters; shorten it.")
    if session.scalar(
        select(RubricItem.id).where(
            RubricItem.lab_id == lab.id, RubricItem.title == name, RubricItem.id != item_id
        )
    ):
        raise Invalid(f"{lab.slug} already has a rubric item called {name!r}.")
    return name


def add_item(
    session: Session, *, lab: Lab, title: str, max_points: float, description: str = ""
) -> RubricItem:
    name = _checked(
        session, lab=lab, title=title, max_points=max_points, description=description, item_id=0
    )
    count = session.scalar(select(func.count()).where(RubricItem.lab_id == lab.id)) or 0
    if count >= MAX_ITEMS:
        raise Invalid(f"{lab.slug} has {MAX_ITEMS} rubric items, the most allowed.")
    item = RubricItem(
        lab_id=lab.id,
        position=int(count),
        title=name,
        max_points=float(max_points),
        description=description.strip(),
    )
    session.add(item)
    session.flush()
    _changed(session, lab=lab)
    return item


def update_item(
    session: Session,
    *,
    lab: Lab,
    item_id: int,
    title: str | None = None,
    max_points: float | None = None,
    description: str | None = None,
) -> tuple[RubricItem, list[str]]:
    """Instructors: change an item's title, points or description (None: kept); the item and a
    sentence per change. Points below what a student already has on it are refused."""
    item = get_item(session, lab=lab, item_id=item_id)
    worth = item.max_points if max_points is None else float(max_points)
    name = _checked(
        session,
        lab=lab,
        title=item.title if title is None else title,
        max_points=worth,
        description=item.description if description is None else description,
        item_id=item.id,
    )
    above = session.scalar(
        select(func.count()).where(RubricScore.item_id == item.id, RubricScore.points > worth)
    )
    if above:
        raise Invalid(
            f"{above} student{'s have' if above != 1 else ' has'} more than {worth:g} points on "
            f"{item.title}; lower their points first, or keep at least that many."
        )
    changes = []
    if name != item.title:
        changes.append(f"is called {name} (was {item.title})")
        item.title = name
    if worth != item.max_points:
        changes.append(f"is worth {worth:g} points (was {item.max_points:g})")
        item.max_points = worth
    if description is not None and description.strip() != item.description:
        item.description = description.strip()
        changes.append("has a new description")
    session.flush()
    if changes:
        _changed(session, lab=lab)
    return item, changes


def get_item(session: Session, *, lab: Lab, item_id: int) -> RubricItem:
    item = session.get(RubricItem, item_id)
    if item is None or item.lab_id != lab.id:
        raise NotFound(f"{lab.slug} has no rubric item {item_id}.")
    return item


def remove_item(session: Session, *, lab: Lab, item_id: int) -> RubricItem:
    """Remove an item and every student's points on it; the item removed."""
    item = get_item(session, lab=lab, item_id=item_id)
    session.delete(item)  # its points go with it (the foreign key's cascade)
    session.flush()
    _changed(session, lab=lab)
    return item


def add_comment(session: Session, *, item: RubricItem, text: str, by: User | None) -> RubricComment:
    body = " ".join(text.split())
    if not body or len(body) > MAX_COMMENT:
        raise Invalid(f"A reusable comment is 1 to {MAX_COMMENT} characters.")
    existing = session.scalar(
        select(RubricComment).where(RubricComment.item_id == item.id, RubricComment.text == body)
    )
    if existing is not None:
        return existing
    row = RubricComment(item_id=item.id, text=body, created_by_id=by.id if by else None)
    session.add(row)
    session.flush()
    return row


def comments_of(session: Session, *, lab: Lab) -> dict[int, list[RubricComment]]:
    out: dict[int, list[RubricComment]] = {}
    for row in session.scalars(
        select(RubricComment)
        .join(RubricItem, RubricItem.id == RubricComment.item_id)
        .where(RubricItem.lab_id == lab.id)
        .order_by(RubricComment.id)
    ):
        out.setdefault(row.item_id, []).append(row)
    return out


def _student(session: Session, *, course: Course, student: User) -> None:
    if role_in(session, user=student, course=course) != Role.student:
        raise Invalid(
            f"{student.email} is not a student of {course.slug}; rubric points are theirs."
        )


def grade(
    session: Session,
    *,
    course: Course,
    lab: Lab,
    student: User,
    scores: dict[int, tuple[float | None, str]],
    by: User | None,
    now: datetime,
) -> list[RubricScore]:
    """Staff: set a student's points (and comment) per item; None points clears the item.
    Every value is checked before any is written."""
    _student(session, course=course, student=student)
    items = {item.id: item for item in items_of(session, lab=lab)}
    for item_id, (points, comment) in scores.items():
        if item_id not in items:
            raise NotFound(f"{lab.slug} has no rubric item {item_id}.")
        item = items[item_id]
        if points is not None and not (0 <= points <= item.max_points):
            raise Invalid(f"{item.title}: {points:g} is outside 0 to {item.max_points:g} points.")
        if len(comment) > 4000:
            raise Invalid(f"{item.title}: the comment is longer than 4000 characters.")
    saved = []
    for item_id, (points, comment) in scores.items():
        row = session.scalar(
            select(RubricScore).where(
                RubricScore.item_id == item_id, RubricScore.user_id == student.id
            )
        )
        if points is None:
            if row is not None:
                session.delete(row)
            continue
        if row is None:
            row = RubricScore(item_id=item_id, lab_id=lab.id, user_id=student.id, points=points)
            session.add(row)
        row.points = float(points)
        row.comment = comment.strip()
        row.graded_by_id = by.id if by else None
        row.updated_at = now
        saved.append(row)
    session.flush()
    _changed(session, lab=lab, user_id=student.id)
    return saved


def grades_of(session: Session, *, lab: Lab, user_id: int) -> list[ItemGrade]:
    scores = {
        s.item_id: s
        for s in session.scalars(
            select(RubricScore).where(RubricScore.lab_id == lab.id, RubricScore.user_id == user_id)
        )
    }
    return [ItemGrade(item=i, score=scores.get(i.id)) for i in items_of(session, lab=lab)]


def graded_counts(session: Session, *, lab: Lab) -> dict[int, int]:
    """Per student: how many of the lab's items they have points on."""
    return as_dict(
        session.execute(
            select(RubricScore.user_id, func.count())
            .where(RubricScore.lab_id == lab.id)
            .group_by(RubricScore.user_id)
        )
    )


def graded_per_item(session: Session, *, lab: Lab) -> dict[int, int]:
    """Per item: how many students have points on it (what removing it takes away)."""
    return as_dict(
        session.execute(
            select(RubricScore.item_id, func.count())
            .where(RubricScore.lab_id == lab.id)
            .group_by(RubricScore.item_id)
        )
    )
