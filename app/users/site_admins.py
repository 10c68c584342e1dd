"""Site administrators: who runs the installation (LMS registrations, every sign-in refusal).

Being one makes nobody staff of a course: a course's pages still ask for its enrolment.
Granted and revoked with `kernelgrader admin`; the first `serve` on an empty database makes
its demo instructor one.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.errors import Conflict, Forbidden, NotFound
from app.users.models import User
from app.users.service import find_user


def require_site_admin(user: User) -> None:
    if not user.is_site_admin:
        raise Forbidden(
            "Only site administrators may see this; one grants it with `kernelgrader admin "
            "grant EMAIL`."
        )


def site_admins(session: Session) -> list[User]:
    return list(session.scalars(select(User).where(User.is_site_admin).order_by(User.email)))


def _account(session: Session, email: str) -> User:
    user = find_user(session, email=email)
    if user is None:
        raise NotFound(f"There is no account {email}; make it first (`kernelgrader user add`).")
    return user


def grant(session: Session, *, email: str) -> User:
    user = _account(session, email)
    user.is_site_admin = True
    session.flush()
    return user


def revoke(session: Session, *, email: str) -> User:
    """Take the role back; the last site administrator keeps it (nobody could grant it on the
    web again, and the LMS registrations would have no one to manage them)."""
    user = _account(session, email)
    if not user.is_site_admin:
        return user
    others = session.scalar(
        select(func.count()).select_from(User).where(User.is_site_admin, User.id != user.id)
    )
    if not others:
        raise Conflict(
            f"{user.email} is the last site administrator; grant the role to someone else first."
        )
    user.is_site_admin = False
    session.flush()
    return user
