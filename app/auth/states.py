"""Values made for one sign-in and used at most once (app.auth.models.SignInState)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from app.auth.models import SignInState
from app.core.database import utcnow


def put(session: Session, key: str, data: Any, *, seconds: int) -> None:
    now = utcnow()
    row = session.get(SignInState, key)
    if row is None:
        session.add(
            SignInState(
                key=key, data=data, created_at=now, expires_at=now + timedelta(seconds=seconds)
            )
        )
    else:
        row.data = data
        row.expires_at = now + timedelta(seconds=seconds)
        row.used_at = None
    session.flush()


def peek(session: Session, key: str) -> Any:
    """The value under `key` while it is unused and unexpired; None otherwise."""
    row = session.scalar(
        select(SignInState).where(
            SignInState.key == key,
            SignInState.used_at.is_(None),
            SignInState.expires_at > utcnow(),
        )
    )
    return None if row is None else row.data


def take(session: Session, key: str) -> bool:
    """Use the value under `key`: True once, for an unexpired one; a conditional write, so of
    two requests racing with one value only one gets it."""
    now = utcnow()
    taken = session.execute(
        update(SignInState)
        .where(
            SignInState.key == key,
            SignInState.used_at.is_(None),
            SignInState.expires_at > now,
        )
        .values(used_at=now)
        .execution_options(synchronize_session=False)
    )
    return taken.rowcount == 1  # type: ignore[attr-defined]


def forget_expired(session: Session) -> int:
    # Used values are kept until they expire, so a replay within their life is still seen.
    # Looked for first: a delete would take SQLite's write lock even with nothing to delete.
    now = utcnow()
    if session.scalar(select(SignInState.key).where(SignInState.expires_at < now).limit(1)) is None:
        return 0
    gone = session.execute(delete(SignInState).where(SignInState.expires_at < now))
    return gone.rowcount  # type: ignore[attr-defined,no-any-return]
