"""Invite links: a one-time link that lets a person set their password (also a reset link).

Only the sha256 of the link's token is stored, like API tokens: a leaked table opens nothing.
Issuing a new link retires the person's older unused ones of the same kind, so a stranger's
"forgot password" (a reset link, mailed to the owner) never retires the invite their course
staff made; setting a password by any way retires every unused one (app.users.passwords).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.core.errors import Invalid, NotFound
from app.core.security import hash_api_token, verify_password
from app.core.settings import get_settings
from app.core.timefmt import when_text
from app.users.models import Invite, InviteKind, User
from app.users.passwords import set_password

MIN_PASSWORD = 8
# Read by the person the link was for, on the page the link opens, beside links to log in and
# to "forgot password" (invite.html): what happened, in their words, and what to do next.
EXPIRED = (
    "This link expired on {when}, so it cannot set a password any more. If you already have "
    "a password, log in; if not, or if you forgot it, ask for a new link."
)
UNKNOWN = (
    "This link cannot be used any more: it was already used, a newer link replaced it, or a "
    "password was set for the account since. If you set your password, log in with it; if "
    "you forgot it, ask for a new link. A link cut short when it was copied ends here too: "
    "open the whole link from the mail."
)


@dataclass(frozen=True)
class IssuedInvite:
    user: User
    url: str
    expires_at: datetime


def invite_url(token: str) -> str:
    return f"{get_settings().public_url.rstrip('/')}/invite/{token}"


def issue_invite(
    session: Session,
    *,
    user: User,
    now: datetime,
    days: float = 7,
    kind: InviteKind = InviteKind.invite,
    shown_in_course_id: int | None = None,
) -> IssuedInvite:
    """A new link of this kind, retiring the user's older unused ones of the same kind.

    `shown_in_course_id`: the link is shown to that course's staff rather than mailed to the
    owner; app.people.links decides when that may be, and lets it work only while it may.
    """
    if days <= 0 or days > 90:
        raise Invalid(
            "An invite link lasts between a moment and 90 days; give --days in that range."
        )
    session.execute(
        update(Invite)
        .where(Invite.user_id == user.id, Invite.used_at.is_(None), Invite.kind == kind.value)
        .values(used_at=now)
    )
    token = secrets.token_urlsafe(32)
    expires_at = now + timedelta(days=days)
    session.add(
        Invite(
            user_id=user.id,
            token_hash=hash_api_token(token),
            expires_at=expires_at,
            kind=kind.value,
            shown_in_course_id=shown_in_course_id,
        )
    )
    session.flush()
    return IssuedInvite(user=user, url=invite_url(token), expires_at=expires_at)


def find_invite(session: Session, *, token: str, now: datetime) -> tuple[Invite, User]:
    """The live invite for a token, or NotFound with a sentence saying why not."""
    invite = session.scalar(select(Invite).where(Invite.token_hash == hash_api_token(token)))
    if invite is None or invite.used_at is not None:
        raise NotFound(UNKNOWN)
    if invite.expires_at <= now:
        raise NotFound(EXPIRED.format(when=when_text(invite.expires_at)))
    return invite, session.get_one(User, invite.user_id)


def check_new_password(password: str, confirm: str) -> None:
    if password != confirm:
        raise Invalid(
            "The two passwords differ; type the same new password twice.", field="confirm"
        )
    if len(password) < MIN_PASSWORD:
        raise Invalid(
            f"The password is shorter than {MIN_PASSWORD} characters; choose a longer one.",
            field="password",
        )
    if len(password) > 1000:
        raise Invalid(
            "The password is longer than 1000 characters; choose a shorter one.", field="password"
        )


def accept_invite(
    session: Session, *, token: str, password: str, confirm: str, now: datetime
) -> User:
    """Set the password through a live link, and use the link up (with every other unused link,
    the account's sessions and API tokens: app.users.passwords)."""
    invite, user = find_invite(session, token=token, now=now)
    check_new_password(password, confirm)
    # Conditional, so two tabs posting the same link cannot both use it.
    used = session.execute(
        update(Invite)
        .where(Invite.id == invite.id, Invite.used_at.is_(None))
        .values(used_at=now)
        .execution_options(synchronize_session=False)
    )
    if used.rowcount != 1:  # type: ignore[attr-defined]
        raise NotFound(UNKNOWN)
    set_password(session, user=user, password=password, now=now)
    # A mailed link proves the address; a link shown to a course's staff proves nothing of it.
    user.password_via_shown_link = invite.shown_in_course_id is not None
    return user


def change_password(
    session: Session, *, user: User, current: str, password: str, confirm: str, now: datetime
) -> int:
    """The owner's new password; returns how many API tokens it revoked (app.users.passwords)."""
    if not verify_password(user.password_hash, current):
        raise Invalid("The current password is not right; type it again.", field="current")
    check_new_password(password, confirm)
    return set_password(session, user=user, password=password, now=now)
