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


# The fields a site administrator fills in, as the form names them, with what they are called.
FIELDS = {
    "name": "name",
    "issuer": "issuer",
    "client_id": "client id",
    "deployment_ids": "deployment ids",
    "auth_login_url": "OIDC authentication URL",
    "auth_token_url": "access token URL",
    "key_set_url": "key set URL",
    "auth_audience": "token audience",
}


# How the sentences of a name or an issuer already taken read (a Conflict, not bad input).
_TAKEN, _OWNS = "exists already", "owns the issuer"


def _url_problem(value: str, what: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or len(value) > 1000:
        shown = value if len(value) <= 80 else value[:77] + "..."
        return f"The {what} '{shown}' is not a web address; copy it from the LMS."
    if parts.scheme == "http" and get_settings().env == "production":
        return f"The {what} must start with https://; kernelgrader calls LMSs over TLS."
    return ""


def _deployments(values: RegistrationValues) -> list[str]:
    return [d for d in re.split(r"[\s,]+", values.deployment_ids.strip()) if d]


def registration_problems(
    session: Session,
    *,
    values: RegistrationValues,
    slug: str | None = None,
    platform: LtiPlatform | None = None,
) -> dict[str, str]:
    """Every problem with what was typed, a sentence per field ({}: none). `slug`: a new
    registration's name; `platform`: the registration being changed."""
    problems: dict[str, str] = {}
    if slug is not None:
        if not _SLUG.match(slug):
            problems["slug"] = (
                f"'{slug[:80]}' is not a registration name; use lower-case letters, digits, "
                "'-' and '_' (it is part of the key set URL)."
            )
        elif session.scalar(select(LtiPlatform.id).where(LtiPlatform.slug == slug)):
            problems["slug"] = f"A registration named {slug} {_TAKEN}; pick another name."
    if len(values.name.strip()) > 200:
        problems["name"] = "The name is longer than 200 characters; shorten it."
    issuer, client_id = values.issuer.strip(), values.client_id.strip()
    if not issuer or len(issuer) > 500:
        problems["issuer"] = (
            "The issuer is missing; copy it from the LMS (see the hints below)."
            if not issuer
            else "The issuer is longer than 500 characters; copy it from the LMS."
        )
    else:
        owner = session.scalar(select(LtiPlatform).where(LtiPlatform.issuer == issuer))
        if owner is not None and (platform is None or owner.id != platform.id):
            problems["issuer"] = (
                f"The registration {owner.slug} {_OWNS} {issuer}; one issuer belongs "
                "to one registration. Add this deployment's id there, or change that one."
            )
    if not client_id or len(client_id) > 500:
        problems["client_id"] = (
            "The client id is missing; copy it from the LMS's registration of the tool."
            if not client_id
            else "The client id is longer than 500 characters; copy it from the LMS."
        )
    if not _deployments(values):
        problems["deployment_ids"] = (
            "Give at least one deployment id; the LMS shows it once the tool is added."
        )
    for field in ("auth_login_url", "auth_token_url", "key_set_url", "auth_audience"):
        value = str(getattr(values, field)).strip()
        if field == "auth_audience" and not value:
            continue
        if problem := _url_problem(value, FIELDS[field]):
            problems[field] = problem
    return problems


def _checked(
    session: Session,
    values: RegistrationValues,
    *,
    slug: str | None = None,
    platform: LtiPlatform | None = None,
) -> dict[str, object]:
    problems = registration_problems(session, values=values, slug=slug, platform=platform)
    if problems:
        taken = all(_TAKEN in text or _OWNS in text for text in problems.values())
        raise (Conflict if taken else Invalid)(" ".join(problems.values()))
    issuer = values.issuer.strip()
    return {
        "name": (values.name.strip() or urlsplit(issuer).netloc or issuer)[:200],
        "issuer": issuer,
        "client_id": values.client_id.strip(),
        "deployment_ids": _deployments(values),
        "auth_login_url": values.auth_login_url.strip(),
        "auth_token_url": values.auth_token_url.strip(),
        "key_set_url": values.key_set_url.strip(),
        "auth_audience": values.auth_audience.strip(),
    }


def create_registration(
    session: Session, *, slug: str, values: RegistrationValues, by: User | None
) -> LtiPlatform:
    """A new registration with its own signing key."""
    slug = slug.strip().lower()
    checked = _checked(session, values, slug=slug)
    platform = LtiPlatform(slug=slug, created_by_id=by.id if by else None, **checked)
    session.add(platform)
    session.flush()
    make_key(session, platform=platform)
    return platform


def update_registration(
    session: Session, *, platform: LtiPlatform, values: RegistrationValues
) -> LtiPlatform:
    """Change what the LMS gave; its users, contexts and key stay."""
    checked = _checked(session, values, platform=platform)
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
