"""Sign-in from outside: one-time states and refused sign-ins (identities: app.users.models)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, utcnow


class SignInState(Base):
    """A value made for one sign-in that may be used once before it expires: an LTI login's
    state and nonce, an OpenID Connect or SAML request's id. Kept in the database, not in a
    cookie, since the LMS or the identity provider posts back from another site. A new API
    token's pad waits here too, for the page that shows the token (app.auth.new_tokens)."""

    __tablename__ = "sign_in_states"

    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    data: Mapped[Any] = mapped_column(JSON, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(index=True)
    used_at: Mapped[datetime | None] = mapped_column(default=None)


class SignInProblem(Base):
    """A refused sign-in or launch: what the person read, and the detail for the staff. Kept
    only where it came through a provider or LMS registration we know (app.auth.problems),
    filed under the course its LMS course is linked to, else for site administrators."""

    __tablename__ = "sign_in_problems"

    id: Mapped[int] = mapped_column(primary_key=True)
    platform_id: Mapped[int | None] = mapped_column(
        ForeignKey("lti_platforms.id", ondelete="CASCADE"), default=None, index=True
    )
    course_id: Mapped[int | None] = mapped_column(
        ForeignKey("courses.id", ondelete="CASCADE"), default=None, index=True
    )
    # "lti", "oidc" or "saml", and the platform or provider it came through ("" if unknown).
    kind: Mapped[str] = mapped_column(String(10))
    source: Mapped[str] = mapped_column(String(200), default="")
    # Quoted to the person, so they can tell the staff which attempt was theirs.
    reference: Mapped[str] = mapped_column(String(20), index=True)
    sentence: Mapped[str] = mapped_column(Text)
    detail: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
