"""A new password ends every other way into the account that was made before it.

Whoever set it (the owner on /account, a set-password link, the operator's CLI), the sessions
begun before now end (app.web.deps compares each session's start with `sessions_ended_at`),
the account's API tokens are revoked and its unused set-password links stop working: a
password that someone else knew, or a link or token they kept, opens nothing afterwards.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import update
from sqlalchemy.orm import Session

from app.core.security import hash_password
from app.users.models import ApiToken, Invite, User


def end_sessions(session: Session, *, user: User, now: datetime) -> None:
    """Every login session of the account begun before `now` is over ("sign out everywhere")."""
    user.sessions_ended_at = now
    session.flush()


def set_password(session: Session, *, user: User, password: str, now: datetime) -> int:
    """Set the password and end what came before it; returns how many API tokens it revoked."""
    user.password_hash = hash_password(password)
    end_sessions(session, user=user, now=now)
    revoked = session.execute(
        update(ApiToken)
        .where(ApiToken.user_id == user.id, ApiToken.revoked_at.is_(None))
        .values(revoked_at=now)
        .execution_options(synchronize_session=False)
    )
    session.execute(
        update(Invite)
        .where(Invite.user_id == user.id, Invite.used_at.is_(None))
        .values(used_at=now)
        .execution_options(synchronize_session=False)
    )
    session.flush()
    return int(revoked.rowcount)  # type: ignore[attr-defined]
