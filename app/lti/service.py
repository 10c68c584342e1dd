"""A course's staff's side of LTI: the LMS courses linked to it, what was sent and refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.auth.problems import recent
from app.courses.models import Course, Lab
from app.lti.models import (
    LtiContext,
    LtiLineItem,
    LtiPlatform,
    LtiScoreSync,
    SyncState,
)
from app.users.models import User


@dataclass(frozen=True)
class PlatformName:
    id: int
    name: str
    issuer: str


@dataclass(frozen=True)
class ColumnRow:
    context: LtiContext
    item: LtiLineItem
    lab: Lab
    counts: dict[str, int]


def course_contexts(session: Session, *, course: Course) -> list[LtiContext]:
    """The LMS courses that open this course, first linked first."""
    return list(
        session.scalars(
            select(LtiContext).where(LtiContext.course_id == course.id).order_by(LtiContext.id)
        )
    )


def overview(session: Session, *, course: Course) -> dict[str, Any]:
    """Everything the course's LMS page shows."""
    # Which LMSs exist (names and issuers: what staff need to tell them apart), not their
    # credentials, which are the site administrators'.
    platforms = [
        PlatformName(id=p.id, name=p.name, issuer=p.issuer)
        for p in session.scalars(select(LtiPlatform).order_by(LtiPlatform.name))
    ]
    contexts = course_contexts(session, course=course)
    context_ids = [c.id for c in contexts]
    items = session.execute(
        select(LtiLineItem, Lab)
        .join(Lab, Lab.id == LtiLineItem.lab_id)
        .where(LtiLineItem.context_id.in_(context_ids))
        .order_by(LtiLineItem.context_id, Lab.slug)
    ).all()
    # Each column's scores by state, for every column in one query.
    counts: dict[int, dict[str, int]] = {item.id: {} for item, _ in items}
    for item_id, state, count in session.execute(
        select(LtiScoreSync.line_item_id, LtiScoreSync.state, func.count())
        .where(LtiScoreSync.line_item_id.in_(list(counts)))
        .group_by(LtiScoreSync.line_item_id, LtiScoreSync.state)
    ):
        counts[item_id][state] = count
    by_id = {c.id: c for c in contexts}
    columns = [
        ColumnRow(context=by_id[item.context_id], item=item, lab=lab, counts=counts[item.id])
        for item, lab in items
    ]
    problems = session.execute(
        select(LtiScoreSync, User, Lab)
        .join(User, User.id == LtiScoreSync.user_id)
        .join(LtiLineItem, LtiLineItem.id == LtiScoreSync.line_item_id)
        .join(Lab, Lab.id == LtiLineItem.lab_id)
        .where(
            LtiLineItem.context_id.in_(context_ids),
            LtiScoreSync.state.in_([SyncState.refused.value, SyncState.failed.value]),
        )
        .order_by(LtiScoreSync.updated_at.desc())
        .limit(200)
    ).all()
    refusals = recent(session, limit=20, course_id=course.id)
    return {
        "platforms": platforms,
        "platform_names": {p.id: p.name for p in platforms},
        "contexts": contexts,
        "columns": columns,
        "problems": problems,
        "refusals": refusals,
    }
