"""Single sign-on providers, one or more per institution."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, utcnow


class SsoProvider(Base):
    __tablename__ = "sso_providers"

    id: Mapped[int] = mapped_column(primary_key=True)
    # In the provider's URLs: /sso/<slug>/login.
    slug: Mapped[str] = mapped_column(String(64), unique=True)
    # The button's words: "Sign in with <name>".
    name: Mapped[str] = mapped_column(String(200))
    # "oidc" or "saml".
    kind: Mapped[str] = mapped_column(String(10))
    # OpenID Connect: the issuer (its /.well-known/openid-configuration is read), the client.
    issuer: Mapped[str] = mapped_column(String(1000), default="")
    client_id: Mapped[str] = mapped_column(String(500), default="")
    client_secret: Mapped[str] = mapped_column(String(500), default="")
    # SAML: the identity provider's metadata, as XML, or the URL it is read from.
    idp_metadata: Mapped[str] = mapped_column(Text, default="")
    idp_metadata_url: Mapped[str] = mapped_column(String(1000), default="")
    # Which claim or attribute holds the email, the name and the stable id.
    email_attribute: Mapped[str] = mapped_column(String(200), default="email")
    name_attribute: Mapped[str] = mapped_column(String(200), default="name")
    # Only emails in these domains are taken (empty: any); an institution vouches for its own.
    email_domains: Mapped[list[str]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
