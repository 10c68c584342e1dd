"""Single sign-on providers and what a sign-in through one means for the account.

A provider is configured per institution (`kernelgrader sso add-oidc` / `add-saml`). Its
attribute mapping names the claim or attribute that holds the email and the name; when a
sign-in lacks them, or gives an email the provider does not vouch for, the person reads one
sentence and a reference, and the staff read which attribute was missing and what came
instead (app.auth.problems).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.accounts import OutsideIdentity, account_for
from app.auth.problems import SignInRefused
from app.core.errors import Conflict, Invalid, NotFound
from app.core.settings import get_settings
from app.sso.models import SsoProvider
from app.users.models import User

_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


@dataclass(frozen=True)
class ProviderView:
    """A provider's settings, copied out of the session for the steps that hold none."""

    slug: str
    name: str
    kind: str
    issuer: str
    client_id: str
    client_secret: str
    idp_metadata: str
    idp_metadata_url: str
    email_attribute: str
    name_attribute: str
    email_domains: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def of(cls, row: SsoProvider) -> ProviderView:
        return cls(
            slug=row.slug,
            name=row.name,
            kind=row.kind,
            issuer=row.issuer,
            client_id=row.client_id,
            client_secret=row.client_secret,
            idp_metadata=row.idp_metadata,
            idp_metadata_url=row.idp_metadata_url,
            email_attribute=row.email_attribute,
            name_attribute=row.name_attribute,
            email_domains=tuple(row.email_domains or ()),
        )


def urls(slug: str) -> dict[str, str]:
    """What the identity provider's administrator enters for kernelgrader."""
    base = get_settings().public_url.rstrip("/")
    return {
        "login": f"{base}/sso/{slug}/login",
        "redirect_uri": f"{base}/sso/{slug}/callback",
        "saml_entity_id": f"{base}/sso/{slug}/saml/metadata",
        "saml_acs": f"{base}/sso/{slug}/saml/acs",
        "saml_metadata": f"{base}/sso/{slug}/saml/metadata",
    }


def providers(session: Session) -> list[SsoProvider]:
    return list(session.scalars(select(SsoProvider).order_by(SsoProvider.name)))


def get_provider(session: Session, *, slug: str) -> ProviderView:
    row = session.scalar(select(SsoProvider).where(SsoProvider.slug == slug))
    if row is None:
        raise NotFound(
            f"There is no university sign-in named {slug}; pick yours on the sign-in page."
        )
    return ProviderView.of(row)


def add_provider(
    session: Session, *, slug: str, name: str, kind: str, **values: Any
) -> SsoProvider:
    if not _SLUG.match(slug):
        raise Invalid(f"'{slug}' is not a provider name; use lower-case letters, digits, '-'.")
    if session.scalar(select(SsoProvider.id).where(SsoProvider.slug == slug)):
        raise Conflict(f"A sign-in provider named {slug} exists already; remove it first.")
    domains = [d.strip().lower().lstrip("@") for d in values.pop("email_domains", []) if d.strip()]
    row = SsoProvider(slug=slug, name=name.strip() or slug, kind=kind, email_domains=domains)
    for key, value in values.items():
        if value is not None:
            setattr(row, key, value)
    session.add(row)
    session.flush()
    return row


def remove_provider(session: Session, *, slug: str) -> bool:
    row = session.scalar(select(SsoProvider).where(SsoProvider.slug == slug))
    if row is None:
        return False
    session.delete(row)
    session.flush()
    return True


def _first(value: Any) -> str:
    if isinstance(value, list | tuple):
        value = value[0] if value else ""
    return str(value or "").strip()


def map_attributes(
    provider: ProviderView, *, subject: str, attributes: dict[str, Any], issuer: str
) -> OutsideIdentity:
    """The identity a sign-in stands for, by the provider's mapping; a sentence if it cannot."""
    received = ", ".join(sorted(attributes)) or "nothing"
    email = _first(attributes.get(provider.email_attribute)).lower()
    name = _first(attributes.get(provider.name_attribute))
    if not name and provider.kind == "oidc":
        name = " ".join(_first(attributes.get(p)) for p in ("given_name", "family_name")).strip()

    def refuse(sentence: str, detail: str) -> SignInRefused:
        return SignInRefused(
            sentence,
            f"{provider.kind} provider {provider.slug}: {detail}; received: {received}",
            kind=provider.kind,
            source=provider.slug,
        )

    if not subject:
        raise refuse(
            f"{provider.name} did not say who you are, so you could not be signed in; tell "
            "your course staff.",
            "no subject (sub / NameID) in the answer",
        )
    if not email or "@" not in email:
        raise refuse(
            f"{provider.name} did not tell kernelgrader your email address, so your course "
            "account cannot be found; tell your course staff.",
            f"the email attribute '{provider.email_attribute}' is missing or not an email "
            f"({email!r}); map another with `kernelgrader sso set {provider.slug} "
            "--email-attribute NAME`, or have the provider release it to this client",
        )
    domain = email.rsplit("@", 1)[1]
    in_domains = domain in provider.email_domains
    if provider.email_domains and not in_domains:
        raise refuse(
            f"Your email {email} is not one that {provider.name} signs in for here; sign in "
            "the way your course told you, or tell your course staff.",
            f"email domain {domain!r} is not among the provider's domains "
            f"{list(provider.email_domains)}",
        )
    verified = attributes.get("email_verified")
    trusted = in_domains or verified is True or str(verified).lower() == "true"
    if not trusted:
        raise refuse(
            f"{provider.name} did not vouch for your email address {email}, so it cannot be "
            "matched to your course account; tell your course staff.",
            "email_verified is not true and no email domains are set for the provider (set "
            f"them with `kernelgrader sso set {provider.slug} --email-domain example.edu`)",
        )
    return OutsideIdentity(
        kind=provider.kind,
        issuer=issuer,
        subject=subject,
        email=email,
        name=name,
        email_trusted=True,
    )


def sign_in(session: Session, identity: OutsideIdentity) -> User:
    return account_for(session, identity).user
