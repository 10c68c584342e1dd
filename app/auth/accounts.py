"""One account per person, whichever way they sign in.

An outside identity (an OpenID Connect subject, a SAML name id) is looked up by (kind, issuer,
subject) first, an LMS user by (registration, subject): once matched, it keeps its account
even when the provider later sends another email. A new identity joins the account that has
its email only when the provider is trusted for emails (an SSO provider's email that is
verified and in the institution's domains), and not even then an account whose password was
set through a link shown to a course's staff rather than mailed to its address; an LMS's email
never joins an account by itself (app.lti.launch: its owner logs in once), though a new account
may take it as its address.
So a student with a password account who then launches from Canvas, or signs in through the
university, stays one person with one gradebook row.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.users.models import User, UserIdentity
from app.users.service import find_user, normalize_email

# Accounts of people whose LMS sends no email get an address in a reserved domain (RFC 2606),
# which nothing delivers to and no person can sign in with.
NO_EMAIL_DOMAIN = "no-email.invalid"


@dataclass(frozen=True)
class OutsideIdentity:
    kind: str  # "lti", "oidc", "saml"
    issuer: str
    subject: str
    email: str = ""
    name: str = ""
    # Whether an account with this email may be taken as this person's.
    email_trusted: bool = False
    # Whether a new account may take this email as its address (when no account has it).
    email_as_address: bool = False
    # The LMS registration of an "lti" identity: its subjects are that registration's alone.
    registration_id: int | None = None


@dataclass(frozen=True)
class Matched:
    user: User
    created: bool  # a new account
    linked: bool  # an existing account got this identity


def placeholder_email(identity: OutsideIdentity) -> str:
    # An LMS user's is per registration: a registration made again meets new placeholders.
    scope = identity.issuer if identity.registration_id is None else identity.registration_id
    digest = hashlib.sha256(f"{identity.kind}\n{scope}\n{identity.subject}".encode()).hexdigest()[
        :24
    ]
    return f"{identity.kind}-{digest}@{NO_EMAIL_DOMAIN}"


def account_for(session: Session, identity: OutsideIdentity) -> Matched:
    """The account of this identity: the one it was matched to before, else the one with its
    email (when trusted), else a new one. Flushes; the caller commits."""
    email = _email_or_blank(identity.email)
    row = session.scalar(select(UserIdentity).where(*identity_key(identity)))
    now = utcnow()
    if row is not None:
        row.last_seen_at = now
        row.email = email
        user = session.get_one(User, row.user_id)
        if identity.name and not user.name:
            user.name = identity.name.strip()[:200]
        _upgrade_placeholder(
            session, user, email, identity.email_trusted or identity.email_as_address
        )
        session.flush()
        return Matched(user=user, created=False, linked=False)
    found = find_user(session, email=email) if email and identity.email_trusted else None
    if found is not None and found.password_via_shown_link:
        # Whoever set its password may not be the address's owner (another course's staff
        # could have made it and used the link they were shown): this person gets an account
        # of their own rather than one a stranger can log in to.
        found = None
    created = found is None
    if found is None:
        # An untrusted email is not taken as an address either: it could be someone else's.
        as_address = identity.email_trusted or identity.email_as_address
        address = email if email and as_address else placeholder_email(identity)
        if find_user(session, email=address) is not None:
            address = placeholder_email(identity)
        user = User(email=address, name=identity.name.strip()[:200])
        session.add(user)
        session.flush()
    else:
        user = found
        if identity.name and not user.name:
            user.name = identity.name.strip()[:200]
    session.add(
        UserIdentity(
            user_id=user.id,
            kind=identity.kind,
            platform_id=identity.registration_id,
            issuer=identity.issuer,
            subject=identity.subject,
            email=email,
            created_at=now,
            last_seen_at=now,
        )
    )
    session.flush()
    return Matched(user=user, created=created, linked=not created)


def identity_key(identity: OutsideIdentity) -> tuple[Any, ...]:
    """The conditions that find an identity's row: an LMS user within its registration."""
    if identity.registration_id is not None:
        return (
            UserIdentity.platform_id == identity.registration_id,
            UserIdentity.subject == identity.subject,
        )
    return (
        UserIdentity.kind == identity.kind,
        UserIdentity.issuer == identity.issuer,
        UserIdentity.subject == identity.subject,
    )


def _email_or_blank(email: str) -> str:
    try:
        return normalize_email(email) if email else ""
    except Exception:
        return ""


def _upgrade_placeholder(session: Session, user: User, email: str, trusted: bool) -> None:
    """An account made without an email takes the first trusted one it is given, unless
    another account already has it (then the two stay apart; staff merge by hand)."""
    placeholder = user.email.endswith("@" + NO_EMAIL_DOMAIN)
    if trusted and email and placeholder and find_user(session, email=email) is None:
        user.email = email
