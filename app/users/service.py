"""Accounts, passwords and API tokens."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.errors import Invalid, NotFound
from app.core.security import hash_api_token, hash_password, new_api_token, verify_password
from app.users.models import ApiToken, User
from app.users.passwords import set_password


def normalize_email(email: str) -> str:
    email = email.strip().lower()
    if "@" not in email or len(email) > 320 or any(c.isspace() for c in email):
        raise Invalid(f"'{email}' is not an email address; give one like ada@example.edu.")
    return email


def find_user(session: Session, *, email: str) -> User | None:
    return session.scalar(select(User).where(User.email == email.strip().lower()))


def get_user(session: Session, *, email: str) -> User:
    user = find_user(session, email=email)
    if user is None:
        raise NotFound(f"No user with email {email} exists; add one with `kernelgrader user add`.")
    return user


def ensure_user(
    session: Session, *, email: str, name: str = "", password: str | None = None
) -> User:
    """Return the user with this email, creating it if needed; a given password is (re)set,
    which for an existing account ends its sessions and API tokens (app.users.passwords)."""
    email = normalize_email(email)
    if len(name.strip()) > 200:
        raise Invalid(f"The name for {email} is longer than 200 characters; shorten it.")
    if password is not None and len(password) < 8:
        raise Invalid("The password is shorter than 8 characters; choose a longer one.")
    user = find_user(session, email=email)
    if user is None:
        user = User(email=email, name=name.strip())
        if password is not None:
            user.password_hash = hash_password(password)
        session.add(user)
    else:
        if name and not user.name:
            user.name = name.strip()
        if password is not None:
            set_password(session, user=user, password=password, now=utcnow())
            user.password_via_shown_link = False  # the operator's CLI vouches for it
    session.flush()
    return user


def authenticate(session: Session, *, email: str, password: str) -> User | None:
    user = find_user(session, email=email)
    if user is None or not verify_password(user.password_hash, password):
        return None
    return user


def create_api_token(session: Session, *, user: User, name: str = "") -> str:
    """Store a new token's hash and return the token itself, which is never stored."""
    if len(name) > 100:
        raise Invalid("The token's label is longer than 100 characters; shorten it.")
    token = new_api_token()
    session.add(ApiToken(user_id=user.id, token_hash=hash_api_token(token), name=name))
    session.flush()
    return token


@dataclass(frozen=True)
class TokenHolder:
    user: User
    token_id: int
    last_used_at: datetime | None


def holder_of_token(session: Session, *, token: str) -> TokenHolder | None:
    """The user a live token belongs to, in one read; the use is noted elsewhere (token_use)."""
    row = session.execute(
        select(User, ApiToken.id, ApiToken.last_used_at)
        .join(ApiToken, ApiToken.user_id == User.id)
        .where(ApiToken.token_hash == hash_api_token(token), ApiToken.revoked_at.is_(None))
    ).first()
    if row is None:
        return None
    user, token_id, last_used_at = row
    return TokenHolder(user=user, token_id=token_id, last_used_at=last_used_at)


def user_for_token(session: Session, *, token: str) -> User | None:
    holder = holder_of_token(session, token=token)
    return holder.user if holder else None


def revoke_token(session: Session, *, token: str) -> bool:
    """Revoke one token by its value; False when it is unknown or already revoked."""
    row = session.scalar(
        select(ApiToken).where(
            ApiToken.token_hash == hash_api_token(token), ApiToken.revoked_at.is_(None)
        )
    )
    if row is None:
        return False
    row.revoked_at = utcnow()
    session.flush()
    return True


def tokens_of(session: Session, *, user: User) -> list[ApiToken]:
    """A user's live tokens, newest first (revoked ones are gone for good)."""
    return list(
        session.scalars(
            select(ApiToken)
            .where(ApiToken.user_id == user.id, ApiToken.revoked_at.is_(None))
            .order_by(ApiToken.id.desc())
        )
    )


def revoke_own_token(session: Session, *, user: User, token_id: int) -> ApiToken:
    """Revoke one of the user's own tokens by its id (its value is never stored)."""
    row = session.get(ApiToken, token_id)
    if row is None or row.user_id != user.id or row.revoked_at is not None:
        raise NotFound("You have no such token, or it was revoked already; reload the page.")
    row.revoked_at = utcnow()
    session.flush()
    return row


def revoke_tokens(session: Session, *, user: User, name: str | None = None) -> int:
    """Revoke a user's live tokens (only those with this label, if given); return how many."""
    query = select(ApiToken).where(ApiToken.user_id == user.id, ApiToken.revoked_at.is_(None))
    if name is not None:
        query = query.where(ApiToken.name == name)
    rows = list(session.scalars(query))
    now = utcnow()
    for row in rows:
        row.revoked_at = now
    session.flush()
    return len(rows)


@dataclass(frozen=True)
class Student:
    """A gradebook row's student: the three columns read of the user."""

    id: int
    name: str
    email: str

    @property
    def display_name(self) -> str:
        return self.name or self.email
