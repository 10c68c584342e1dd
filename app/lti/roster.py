"""The course roster from the LMS (LTI Names and Role Provisioning Services).

Asked for by every launch (`roster_wanted_at`) and done by the workers' LTI thread, or at once
by staff's "Sync the roster now". Reading the LMS holds no database connection: the context
is read in one short transaction, the members fetched, then applied in another.

Each active member becomes (or stays) enrolled, in the course the LMS course is linked to,
with the role its context roles give (app.lti.roles: never demoting the last instructor);
accounts are matched as at a launch (app.lti.launch.known_account), so a member whose email
belongs to an existing account is not joined to it until they launch and log in once. Members
the LMS reports inactive or deleted keep their enrolment and submissions; the result says how
many there were.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from app.auth.accounts import OutsideIdentity
from app.core.database import session_scope, utcnow
from app.courses.models import Course, Role
from app.lti.launch import known_account
from app.lti.models import LtiContext, LtiPlatform
from app.lti.roles import apply_role, role_from

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RosterRead:
    context_id: int
    platform_id: int
    issuer: str
    course_id: int
    url: str
    # pylti1p3's Registration (the tool's key included), read with the context.
    registration: Any


def read_context(session: Session, *, context_id: int) -> RosterRead | None:
    context = session.get(LtiContext, context_id)
    if context is None or context.course_id is None or not context.memberships_url:
        return None
    from app.lti.tool import registration_of

    platform = session.get_one(LtiPlatform, context.platform_id)
    return RosterRead(
        registration=registration_of(session, platform),
        context_id=context.id,
        platform_id=platform.id,
        issuer=platform.issuer,
        course_id=context.course_id,
        url=context.memberships_url,
    )


def fetch_members(read: RosterRead) -> list[dict[str, Any]]:
    """Every page of the LMS's membership list (no database connection held)."""
    from pylti1p3.names_roles import NamesRolesProvisioningService

    from app.lti.tool import CachingServiceConnector

    service = NamesRolesProvisioningService(
        CachingServiceConnector(read.registration), {"context_memberships_url": read.url}
    )
    return [dict(member) for member in service.get_members()]


def apply_members(
    session: Session, *, read: RosterRead, members: list[dict[str, Any]], now: datetime
) -> str:
    """Enrol the active members; returns the sentence staff read about this sync."""
    context = session.get(LtiContext, read.context_id)
    if context is None or context.course_id != read.course_id:
        return "The LMS course was unlinked while its roster was read; nothing was applied."
    course = session.get_one(Course, read.course_id)
    counts = {"student": 0, "staff": 0, "new": 0, "inactive": 0, "waiting": 0, "skipped": 0}
    for member in members:
        status = str(member.get("status") or "Active")
        if status != "Active":
            counts["inactive"] += 1
            continue
        role = role_from(list(member.get("roles") or []))
        subject = str(member.get("user_id") or "")[:500]
        if role is None or not subject:
            counts["skipped"] += 1
            continue
        name = member.get("name") or " ".join(
            str(member.get(part, "")) for part in ("given_name", "family_name")
        )
        identity = OutsideIdentity(
            kind="lti",
            issuer=read.issuer,
            subject=subject,
            email=str(member.get("email") or "")[:320],
            name=str(name or "").strip()[:200],
            registration_id=read.platform_id,
        )
        known = known_account(session, identity)
        if known is None:
            counts["waiting"] += 1  # their email is another account's: they log in once
            continue
        counts["new"] += known.created
        given = apply_role(session, user=known.user, course=course, role=role)
        counts["student" if given is Role.student else "staff"] += 1
    sentence = (
        f"{counts['student']} students and {counts['staff']} staff enrolled from the LMS "
        f"({counts['new']} new accounts)"
    )
    extras = []
    if counts["waiting"]:
        extras.append(
            f"{counts['waiting']} whose email belongs to an existing account join it when "
            "they first open a link and log in"
        )
    if counts["inactive"]:
        extras.append(f"{counts['inactive']} inactive in the LMS were left as they were")
    if counts["skipped"]:
        extras.append(f"{counts['skipped']} with no id or no learner or staff role were skipped")
    sentence += ("; " + "; ".join(extras) if extras else "") + "."
    context.roster_synced_at = now
    context.roster_result = sentence
    session.flush()
    return sentence


def record_failure(session: Session, *, context_id: int, reason: str, now: datetime) -> None:
    context = session.get(LtiContext, context_id)
    if context is not None:
        context.roster_synced_at = now
        context.roster_result = f"The LMS did not give the roster: {reason}"


def sync_wanted_rosters(
    *, now: datetime | None = None, limit: int = 20, course_id: int | None = None
) -> list[str]:
    """The workers' pass: every roster a launch asked for since its last sync (of one
    course's LMS courses, if given)."""
    from app.lti.grades import lms_reason

    now = now or utcnow()
    query = select(LtiContext.id).limit(limit)
    if course_id is not None:
        query = query.where(LtiContext.course_id == course_id)
    with session_scope() as session:
        ids = list(
            session.scalars(
                query.where(
                    LtiContext.roster_wanted_at.is_not(None),
                    LtiContext.memberships_url != "",
                    LtiContext.course_id.is_not(None),
                    or_(
                        LtiContext.roster_synced_at.is_(None),
                        LtiContext.roster_synced_at < LtiContext.roster_wanted_at,
                    ),
                )
            )
        )
        reads = [read for i in ids if (read := read_context(session, context_id=i)) is not None]
        # Marked first, so another worker's pass skips them while this one works.
        for read in reads:
            session.get_one(LtiContext, read.context_id).roster_synced_at = now
    results = []
    for read in reads:
        try:
            members = fetch_members(read)
        except Exception as exc:
            reason = lms_reason(exc)
            log.warning("LTI roster of context %s not read: %s", read.context_id, reason)
            with session_scope() as session:
                record_failure(session, context_id=read.context_id, reason=reason, now=now)
            continue
        with session_scope() as session:
            results.append(apply_members(session, read=read, members=members, now=now))
    return results
