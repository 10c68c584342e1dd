"""Staff's side of LTI: registering an LMS, connecting LMS courses, what was sent and refused."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.auth.models import SignInProblem
from app.core.errors import Conflict, Invalid
from app.courses.models import Course, Lab, Role
from app.courses.service import create_course, enroll
from app.lti.models import (
    LtiContext,
    LtiLineItem,
    LtiPlatform,
    LtiScoreSync,
    SyncState,
)
from app.users.models import User


def _url(value: str, what: str) -> str:
    value = value.strip()
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or len(value) > 1000:
        raise Invalid(f"The {what} '{value}' is not a web address; copy it from the LMS.")
    return value


def register_platform(
    session: Session,
    *,
    course: Course,
    user: User,
    name: str,
    issuer: str,
    client_id: str,
    deployment_ids: str,
    auth_login_url: str,
    auth_token_url: str,
    key_set_url: str,
    auth_audience: str = "",
) -> LtiPlatform:
    """Register an LMS for this course: new LMS courses launched through it come here."""
    issuer, client_id = issuer.strip(), client_id.strip()
    if not issuer or len(issuer) > 500:
        raise Invalid("The issuer is missing; copy it from the LMS (see the hints below).")
    if not client_id or len(client_id) > 500:
        raise Invalid("The client id is missing; copy it from the LMS's registration of the tool.")
    deployments = [d for d in re.split(r"[\s,]+", deployment_ids.strip()) if d]
    if not deployments:
        raise Invalid("Give at least one deployment id; the LMS shows it once the tool is added.")
    if session.scalar(
        select(LtiPlatform.id).where(
            LtiPlatform.issuer == issuer, LtiPlatform.client_id == client_id
        )
    ):
        raise Conflict(
            f"This LMS (issuer {issuer}, client id {client_id}) is registered already; add its "
            "deployment ids there instead."
        )
    platform = LtiPlatform(
        name=(name.strip() or urlsplit(issuer).netloc or issuer)[:200],
        issuer=issuer,
        client_id=client_id,
        deployment_ids=deployments,
        auth_login_url=_url(auth_login_url, "OIDC authentication URL"),
        auth_token_url=_url(auth_token_url, "access token URL"),
        key_set_url=_url(key_set_url, "key set URL"),
        auth_audience=_url(auth_audience, "token audience") if auth_audience.strip() else "",
        course_id=course.id,
        created_by_id=user.id,
    )
    session.add(platform)
    session.flush()
    return platform


def connect_context(
    session: Session, *, context: LtiContext, user: User, course_slug: str
) -> Course:
    """Connect an LMS course to a kernelgrader course its instructor teaches, or to a new
    one (`course_slug` "new": made from the LMS course's title, with them as instructor)."""
    from app.lti.launch import staff_courses

    if context.course_id is not None:
        return session.get_one(Course, context.course_id)
    if course_slug == "new":
        course = create_course(
            session, slug=_free_slug(session, context.title), title=context.title
        )
        enroll(session, user=user, course=course, role=Role.instructor)
    else:
        found = [c for c in staff_courses(session, user=user) if c.slug == course_slug]
        if not found:
            raise Invalid(
                f"You do not teach a course named {course_slug}; pick one of yours, or make a "
                "new one."
            )
        course = found[0]
    context.course_id = course.id
    session.flush()
    return course


def _free_slug(session: Session, title: str) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:50] or "lms-course"
    if not base[0].isalnum():
        base = "c" + base
    slug, n = base, 1
    while session.scalar(select(Course.id).where(Course.slug == slug)):
        n += 1
        slug = f"{base}-{n}"
    return slug


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
    platforms = list(
        session.scalars(
            select(LtiPlatform).where(LtiPlatform.course_id == course.id).order_by(LtiPlatform.id)
        )
    )
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
    issuers = {p.issuer for p in platforms} | {
        p.issuer
        for p in session.scalars(
            select(LtiPlatform).where(LtiPlatform.id.in_([c.platform_id for c in contexts]))
        )
    }
    refusals = list(
        session.scalars(
            select(SignInProblem)
            .where(SignInProblem.kind == "lti", SignInProblem.source.in_(issuers))
            .order_by(SignInProblem.created_at.desc())
            .limit(20)
        )
    )
    return {
        "platforms": platforms,
        "contexts": contexts,
        "columns": columns,
        "problems": problems,
        "refusals": refusals,
    }
