"""LMS registrations: installation-level objects, made, changed and removed by site
administrators (the /admin/lti page, `kernelgrader lti`), never by a course's staff.

A registration vouches for its own users (an LMS user is (registration, `sub`)) and for its
contexts, but reaches a course only through a context that course's instructor linked
(app.lti.linking). It owns its issuer alone, and signs with a key of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.core.errors import Conflict, Invalid, NotFound
from app.core.settings import get_settings
from app.lti.keys import make_key
from app.lti.models import LtiContext, LtiPlatform
from app.users.models import User, UserIdentity

_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def tool_urls(slug: str | None = None) -> dict[str, str]:
    """What an LMS's administrator enters for kernelgrader; the key set URL is the
    registration's own (`{slug}` where none is given yet)."""
    base = get_settings().public_url.rstrip("/")
    return {
        "login": f"{base}/lti/login",
        "launch": f"{base}/lti/launch",
        "jwks": f"{base}/lti/jwks/{slug or '{slug}'}",
        # Registrations made before each had its own key read this one until rotated.
        "shared_jwks": f"{base}/lti/jwks",
        "deep_linking": f"{base}/lti/launch",
        "domain": base.split("://", 1)[-1].split("/", 1)[0],
    }


@dataclass(frozen=True)
class RegistrationValues:
    """What the LMS gave, as typed on the page or the command line."""

    name: str
    issuer: str
    client_id: str
    deployment_ids: str
    auth_login_url: str
    auth_token_url: str
    key_set_url: str
    auth_audience: str = ""


def _url(value: str, what: str) -> str:
    value = value.strip()
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or len(value) > 1000:
        raise Invalid(f"The {what} '{value}' is not a web address; copy it from the LMS.")
    if parts.scheme == "http" and get_settings().env == "production":
        raise Invalid(f"The {what} must start with https://; kernelgrader calls LMSs over TLS.")
    return value


def _checked(values: RegistrationValues) -> dict[str, object]:
    issuer, client_id = values.issuer.strip(), values.client_id.strip()
    if not issuer or len(issuer) > 500:
        raise Invalid("The issuer is missing; copy it from the LMS (see the hints below).")
    if not client_id or len(client_id) > 500:
        raise Invalid("The client id is missing; copy it from the LMS's registration of the tool.")
    deployments = [d for d in re.split(r"[\s,]+", values.deployment_ids.strip()) if d]
    if not deployments:
        raise Invalid("Give at least one deployment id; the LMS shows it once the tool is added.")
    return {
        "name": (values.name.strip() or urlsplit(issuer).netloc or issuer)[:200],
        "issuer": issuer,
        "client_id": client_id,
        "deployment_ids": deployments,
        "auth_login_url": _url(values.auth_login_url, "OIDC authentication URL"),
        "auth_token_url": _url(values.auth_token_url, "access token URL"),
        "key_set_url": _url(values.key_set_url, "key set URL"),
        "auth_audience": (
            _url(values.auth_audience, "token audience") if values.auth_audience.strip() else ""
        ),
    }


def _issuer_free(session: Session, issuer: str, *, but: int | None = None) -> None:
    owner = session.scalar(select(LtiPlatform).where(LtiPlatform.issuer == issuer))
    if owner is not None and owner.id != but:
        raise Conflict(
            f"The registration {owner.slug} owns the issuer {issuer}; one issuer belongs to "
            "one registration. Add this deployment's id there, or change that one."
        )


def create_registration(
    session: Session, *, slug: str, values: RegistrationValues, by: User | None
) -> LtiPlatform:
    """A new registration with its own signing key."""
    slug = slug.strip().lower()
    if not _SLUG.match(slug):
        raise Invalid(
            f"'{slug}' is not a registration name; use lower-case letters, digits, '-' and '_' "
            "(it is part of the key set URL)."
        )
    if session.scalar(select(LtiPlatform.id).where(LtiPlatform.slug == slug)):
        raise Conflict(f"A registration named {slug} exists already; pick another name.")
    checked = _checked(values)
    _issuer_free(session, str(checked["issuer"]))
    platform = LtiPlatform(slug=slug, created_by_id=by.id if by else None, **checked)
    session.add(platform)
    session.flush()
    make_key(session, platform=platform)
    return platform


def update_registration(
    session: Session, *, platform: LtiPlatform, values: RegistrationValues
) -> LtiPlatform:
    """Change what the LMS gave; its users, contexts and key stay."""
    checked = _checked(values)
    _issuer_free(session, str(checked["issuer"]), but=platform.id)
    if checked["issuer"] != platform.issuer:
        # Identities are keyed by registration; their issuer is kept for reading.
        session.execute(
            update(UserIdentity)
            .where(UserIdentity.platform_id == platform.id)
            .values(issuer=checked["issuer"])
            .execution_options(synchronize_session=False)
        )
    for name, value in checked.items():
        setattr(platform, name, value)
    session.flush()
    return platform


def get_registration(session: Session, *, slug: str) -> LtiPlatform:
    platform = session.scalar(select(LtiPlatform).where(LtiPlatform.slug == slug))
    if platform is None:
        raise NotFound(f"There is no LMS registration named {slug}.")
    return platform


def registrations(session: Session) -> list[LtiPlatform]:
    return list(session.scalars(select(LtiPlatform).order_by(LtiPlatform.slug)))


@dataclass(frozen=True)
class Removed:
    contexts: int
    identities: int


def remove_registration(session: Session, *, platform: LtiPlatform) -> Removed:
    """Remove it with its LMS courses' links, grade columns and LMS sign-ins; accounts,
    enrolments and submissions stay. A registration made again later reaches none of its
    users until each logs in once."""
    counted = Removed(
        contexts=int(
            session.scalar(
                select(func.count())
                .select_from(LtiContext)
                .where(LtiContext.platform_id == platform.id)
            )
            or 0
        ),
        identities=int(
            session.scalar(
                select(func.count())
                .select_from(UserIdentity)
                .where(UserIdentity.platform_id == platform.id)
            )
            or 0
        ),
    )
    session.delete(platform)
    session.flush()
    return counted
