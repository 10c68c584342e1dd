"""LTI 1.3: the platforms (LMSs) registered, the tool's keys, the LMS courses and links that
lead into kernelgrader, the grade columns made in them and the scores sent to them."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, String, Text, UniqueConstraint, false
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, utcnow


class LtiPlatform(Base):
    """One registration of kernelgrader in an LMS, made by a site administrator: what the LMS
    gave, and the tool's own key for it (an LMS must never accept what was signed for
    another registration)."""

    __tablename__ = "lti_platforms"

    id: Mapped[int] = mapped_column(primary_key=True)
    # Names the registration in its key set's URL, /lti/jwks/<slug>, known before the LMS
    # gives its client id (an LMS asks for the key set URL first).
    slug: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    # One registration owns an issuer: its users and contexts are reached through it alone.
    issuer: Mapped[str] = mapped_column(String(500), unique=True)
    client_id: Mapped[str] = mapped_column(String(500))
    # The LMS's OIDC authorization endpoint, its OAuth2 token endpoint and its key set.
    auth_login_url: Mapped[str] = mapped_column(String(1000))
    auth_token_url: Mapped[str] = mapped_column(String(1000))
    key_set_url: Mapped[str] = mapped_column(String(1000))
    # The `aud` of the token request's assertion where the LMS wants other than the token
    # URL (Moodle and Canvas take the token URL; D2L and Blackboard name one).
    auth_audience: Mapped[str] = mapped_column(String(1000), default="")
    deployment_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    # A registration made before each had its own key signs with the one key served at
    # /lti/jwks until a site administrator rotates it (app.lti.keys).
    shared_key: Mapped[bool] = mapped_column(default=False, server_default=false())
    created_by_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), default=None
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class LtiToolKey(Base):
    """A signing key of the tool: a registration's own (served at /lti/jwks/<slug>), or the
    one key shared by registrations made before that (`platform_id` None, at /lti/jwks)."""

    __tablename__ = "lti_tool_keys"

    id: Mapped[int] = mapped_column(primary_key=True)
    platform_id: Mapped[int | None] = mapped_column(
        ForeignKey("lti_platforms.id", ondelete="CASCADE"), default=None, index=True
    )
    kid: Mapped[str] = mapped_column(String(100), unique=True)
    private_pem: Mapped[str] = mapped_column(Text)
    public_jwk: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # A retired key stays in the key set a while, so tokens it signed still verify.
    retired_at: Mapped[datetime | None] = mapped_column(default=None)


class LtiContext(Base):
    """An LMS course (the launch's `context`) and the kernelgrader course it leads into: a
    row exists once an instructor of that course linked it (app.lti.linking)."""

    __tablename__ = "lti_contexts"
    __table_args__ = (UniqueConstraint("platform_id", "deployment_id", "context_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    platform_id: Mapped[int] = mapped_column(
        ForeignKey("lti_platforms.id", ondelete="CASCADE"), index=True
    )
    deployment_id: Mapped[str] = mapped_column(String(500))
    context_id: Mapped[str] = mapped_column(String(500))
    title: Mapped[str] = mapped_column(String(500), default="")
    course_id: Mapped[int | None] = mapped_column(
        ForeignKey("courses.id", ondelete="SET NULL"), default=None, index=True
    )
    # The services the latest launch offered ("" when it offered none).
    memberships_url: Mapped[str] = mapped_column(String(1000), default="")
    lineitems_url: Mapped[str] = mapped_column(String(1000), default="")
    ags_scopes: Mapped[list[str]] = mapped_column(JSON, default=list)
    # The roster: asked for by a launch or a button, done by a worker or the button.
    roster_wanted_at: Mapped[datetime | None] = mapped_column(default=None)
    roster_synced_at: Mapped[datetime | None] = mapped_column(default=None)
    roster_result: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class LtiResourceLink(Base):
    """A link placed in an LMS course; deep linking (or its custom `lab`) ties it to a lab."""

    __tablename__ = "lti_resource_links"
    __table_args__ = (UniqueConstraint("context_id", "resource_link_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    context_id: Mapped[int] = mapped_column(
        ForeignKey("lti_contexts.id", ondelete="CASCADE"), index=True
    )
    resource_link_id: Mapped[str] = mapped_column(String(500))
    title: Mapped[str] = mapped_column(String(500), default="")
    lab_id: Mapped[int | None] = mapped_column(
        ForeignKey("labs.id", ondelete="SET NULL"), default=None
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class LtiLineItem(Base):
    """The one grade column of a lab in one LMS course, made once and found again after."""

    __tablename__ = "lti_line_items"
    __table_args__ = (UniqueConstraint("context_id", "lab_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    context_id: Mapped[int] = mapped_column(
        ForeignKey("lti_contexts.id", ondelete="CASCADE"), index=True
    )
    lab_id: Mapped[int] = mapped_column(ForeignKey("labs.id", ondelete="CASCADE"), index=True)
    # "" until the column exists in the LMS (made by the LMS from a deep link, or by us).
    url: Mapped[str] = mapped_column(String(1000), default="")
    label: Mapped[str] = mapped_column(String(500), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class SyncState(enum.StrEnum):
    pending = "pending"  # a score to send (new, changed, or a retry is due)
    sent = "sent"  # the LMS took the score in `sent_score`
    refused = "refused"  # the LMS refused it; its reason is in `error`; retried later
    failed = "failed"  # out of attempts; staff retry it by hand


class LtiScoreSync(Base):
    """One student's counted score in one grade column: what to send, what was sent, and how
    the last attempt went."""

    __tablename__ = "lti_score_syncs"
    __table_args__ = (UniqueConstraint("line_item_id", "user_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    line_item_id: Mapped[int] = mapped_column(
        ForeignKey("lti_line_items.id", ondelete="CASCADE"), index=True
    )
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # The LMS's id of the student (the launch's `sub`).
    lti_user_id: Mapped[str] = mapped_column(String(500))
    score: Mapped[float]
    max_score: Mapped[float]
    # When the counted submission was made: the LMS judges lateness by it, not by the send.
    submitted_at: Mapped[datetime | None] = mapped_column(default=None)
    state: Mapped[str] = mapped_column(String(10), default=SyncState.pending.value, index=True)
    attempts: Mapped[int] = mapped_column(default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(default=utcnow)
    sent_score: Mapped[float | None] = mapped_column(default=None)
    sent_at: Mapped[datetime | None] = mapped_column(default=None)
    # The LMS's own words when it refused the score, or what failed on the way.
    error: Mapped[str] = mapped_column(Text, default="")
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
