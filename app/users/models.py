"""Users, their API tokens, and the outside identities (LMS, OpenID, SAML) that sign them in."""

from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import ForeignKey, String, UniqueConstraint, false
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, utcnow


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(320), unique=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    # None: the account cannot log in on the web (API token only, or not yet activated).
    password_hash: Mapped[str | None] = mapped_column(String(200), default=None)
    # Runs the installation (LMS registrations, sign-in records); staff of no course by it.
    is_site_admin: Mapped[bool] = mapped_column(default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # Login sessions begun before this are over (a new password, "sign out everywhere"): the
    # session cookie carries when it began, and each request compares (app.web.deps).
    sessions_ended_at: Mapped[datetime | None] = mapped_column(default=None)
    # The password was set through a link shown to a course's staff (a server without mail),
    # not one mailed to the address: nothing shows that whoever set it receives that mail, so
    # a university sign-in with this email does not join the account (app.auth.accounts).
    password_via_shown_link: Mapped[bool] = mapped_column(default=False, server_default=false())

    @property
    def display_name(self) -> str:
        return self.name or self.email


class InviteKind(enum.StrEnum):
    # Made by a course's staff or the operator (`kernelgrader user invite`).
    invite = "invite"
    # Asked for through "forgot password", mailed to the account's own address.
    reset = "reset"


class Invite(Base):
    """A one-time link to set a password; only the sha256 of its token is stored."""

    __tablename__ = "invites"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]
    # Set when the link was used, or when a newer link of the same kind replaced it, or when
    # the account's password was set another way.
    used_at: Mapped[datetime | None] = mapped_column(default=None)
    kind: Mapped[str] = mapped_column(String(10), default=InviteKind.invite.value)
    # The course whose staff were shown the link (no mail): it works only while the account
    # is still unused and enrolled in no other course (app.people.links).
    shown_in_course_id: Mapped[int | None] = mapped_column(
        ForeignKey("courses.id", ondelete="CASCADE"), default=None
    )


class ApiToken(Base):
    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(100), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(default=None)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)


class UserIdentity(Base):
    """One outside sign-in (an LMS user, an OpenID Connect subject, a SAML name id) that is
    a kernelgrader account. An account may have several; an identity belongs to one account."""

    __tablename__ = "user_identities"
    __table_args__ = (
        UniqueConstraint("kind", "issuer", "subject"),
        # An LMS user is (registration, `sub`): a registration reaches its own users only.
        UniqueConstraint("platform_id", "subject"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # "lti", "oidc" or "saml".
    kind: Mapped[str] = mapped_column(String(10))
    # The LMS registration an "lti" identity came through (None for the others).
    platform_id: Mapped[int | None] = mapped_column(
        ForeignKey("lti_platforms.id", ondelete="CASCADE"), default=None, index=True
    )
    # The LMS's issuer, the OpenID provider's issuer, the SAML identity provider's entity id.
    issuer: Mapped[str] = mapped_column(String(500))
    subject: Mapped[str] = mapped_column(String(500))
    # The email the provider gave at the last sign-in ("" when it gave none).
    email: Mapped[str] = mapped_column(String(320), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(default=utcnow)
