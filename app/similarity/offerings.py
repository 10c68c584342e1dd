"""Earlier offerings: which other courses a course's similarity reports may compare against.

Only the same course's earlier offerings count as "past", and only those that someone who
teaches both linked (an instructor of each: the staff of one course vouch for nothing beyond
it). The staff of either course see the link and may remove it. A course still running (a
lab whose grades are not released yet) is never "past" to another: it cannot be linked as an
earlier offering, and a linked one that runs again (a new lab) is left out of new reports until
it is over. A report's page shows another course's sources and emails only while a link
between the two courses stands.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, or_, select
from sqlalchemy.orm import Session

from app.core.database import as_dict
from app.core.errors import Forbidden, Invalid, NotFound
from app.core.timefmt import when_text
from app.courses.models import Course, Lab, Role
from app.courses.release import is_released, released_at
from app.courses.service import labs_of, require_staff, role_in
from app.similarity.models import EarlierOffering
from app.users.models import User


@dataclass(frozen=True)
class OfferingLink:
    later: Course
    earlier: Course
    linked_by: str  # the email of who linked them ("" once that account is gone)
    created_at: datetime


def still_running(session: Session, *, course: Course, now: datetime) -> str:
    """ "" when the course is over (every lab's grades released), else a sentence why not."""
    labs = labs_of(session, course=course)
    if not labs:
        return f"{course.slug} has no labs, so it has no submissions to compare with."
    for lab in labs:
        if not is_released(course, lab, now=now):
            at = released_at(course, lab)
            when = f"at {when_text(at)}" if at is not None else "when its staff release them"
            return (
                f"{course.slug} is still running: {lab.slug} releases its grades {when}. A "
                "course counts as an earlier offering once every lab's grades are released."
            )
    return ""


def _taught_by(session: Session, *, slug: str, user: User) -> Course:
    """The course, if the user is one of its instructors; else one sentence for both cases."""
    course = session.scalar(select(Course).where(Course.slug == slug.strip()))
    if course is None or role_in(session, user=user, course=course) is not Role.instructor:
        raise Forbidden(
            f"You do not teach a course named {slug.strip()!r}: only an instructor of both "
            "courses may link one as the other's earlier offering."
        )
    return course


def link_earlier(
    session: Session, *, course: Course, earlier_slug: str, user: User, now: datetime
) -> EarlierOffering:
    """An instructor of both courses: compare `course`'s reports with `earlier`'s submissions."""
    if role_in(session, user=user, course=course) is not Role.instructor:
        raise Forbidden(
            f"Only an instructor of {course.slug} (and of the earlier course) may link an "
            "earlier offering to it."
        )
    earlier = _taught_by(session, slug=earlier_slug, user=user)
    if earlier.id == course.id:
        raise Invalid(f"{course.slug} cannot be its own earlier offering; name another course.")
    reverse = session.scalar(
        select(EarlierOffering.id).where(
            EarlierOffering.course_id == earlier.id, EarlierOffering.earlier_course_id == course.id
        )
    )
    if reverse is not None:
        raise Invalid(
            f"{course.slug} is already linked as an earlier offering of {earlier.slug}; one "
            "of the two came first. Remove that link first if it is the wrong way round."
        )
    why = still_running(session, course=earlier, now=now)
    if why:
        raise Invalid(why)
    found = session.scalar(
        select(EarlierOffering).where(
            EarlierOffering.course_id == course.id, EarlierOffering.earlier_course_id == earlier.id
        )
    )
    if found is not None:
        return found
    link = EarlierOffering(
        course_id=course.id, earlier_course_id=earlier.id, linked_by_id=user.id, created_at=now
    )
    session.add(link)
    session.flush()
    return link


def unlink(session: Session, *, course: Course, other_slug: str, user: User) -> bool:
    """The staff of either course: remove the link between the two, whichever way it points;
    False when there was none."""
    require_staff(session, user=user, course=course)
    other = session.scalar(select(Course).where(Course.slug == other_slug.strip()))
    if other is None:
        raise NotFound(f"There is no course named {other_slug.strip()!r} linked to {course.slug}.")
    gone = session.execute(
        delete(EarlierOffering)
        .where(
            or_(
                (EarlierOffering.course_id == course.id)
                & (EarlierOffering.earlier_course_id == other.id),
                (EarlierOffering.course_id == other.id)
                & (EarlierOffering.earlier_course_id == course.id),
            )
        )
        .execution_options(synchronize_session=False)
    )
    return bool(gone.rowcount)  # type: ignore[attr-defined]


def links_of(session: Session, *, course: Course, user: User) -> list[OfferingLink]:
    """The staff of the course: its earlier offerings, and the later ones that compare with it."""
    require_staff(session, user=user, course=course)
    rows = session.scalars(
        select(EarlierOffering)
        .where(
            or_(
                EarlierOffering.course_id == course.id,
                EarlierOffering.earlier_course_id == course.id,
            )
        )
        .order_by(EarlierOffering.id)
    ).all()
    ids = {r.course_id for r in rows} | {r.earlier_course_id for r in rows}
    courses = {c.id: c for c in session.scalars(select(Course).where(Course.id.in_(ids or [-1])))}
    emails = as_dict(
        session.execute(
            select(User.id, User.email).where(
                User.id.in_({r.linked_by_id for r in rows if r.linked_by_id} or {-1})
            )
        )
    )
    return [
        OfferingLink(
            later=courses[r.course_id],
            earlier=courses[r.earlier_course_id],
            linked_by=emails.get(r.linked_by_id, "") if r.linked_by_id else "",
            created_at=r.created_at,
        )
        for r in rows
    ]


def earlier_course_ids(session: Session, *, course_id: int) -> set[int]:
    """The courses linked as earlier offerings of this one, running or not."""
    return set(
        session.scalars(
            select(EarlierOffering.earlier_course_id).where(EarlierOffering.course_id == course_id)
        )
    )


def past_labs(session: Session, *, lab: Lab, now: datetime) -> list[Lab]:
    """The same lab (by its id) in the course's linked earlier offerings that are over now."""
    ids = earlier_course_ids(session, course_id=lab.course_id)
    if not ids:
        return []
    over = [
        c.id
        for c in session.scalars(select(Course).where(Course.id.in_(ids)))
        if not still_running(session, course=c, now=now)
    ]
    return list(
        session.scalars(
            select(Lab)
            .where(Lab.course_id.in_(over or [-1]), Lab.slug == lab.slug)
            .order_by(Lab.id)
        )
    )
