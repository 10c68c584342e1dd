"""An LTI 1.3 launch: checked by pylti1p3, then the person, their course, role and lab.

The order is the protocol's: the LMS starts a login (`login`), the browser comes back with a
signed id_token (`launch`), which pylti1p3 checks against the state and nonce stored at the
login, the LMS's key set, the registration and the deployment. Only a launch that passes
every check creates or changes anything; a refused one is told in a sentence and logged
(app.auth.problems) and leaves nothing behind.

What a registration vouches for, and no more: who its user is (registration, `sub`), and
their role in an LMS course. That role acts only in the kernelgrader course an instructor of
that course linked the LMS course to (app.lti.linking); a launch from an LMS course nobody
linked lands nowhere. The LMS's email never opens an existing account by itself: that
account's owner logs in once to join the two.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from pylti1p3.exception import (
    LtiException,
    LtiInvalidNonceException,
    LtiKeyException,
    OIDCException,
)
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth import states
from app.auth.accounts import Matched, OutsideIdentity, account_for, identity_key
from app.auth.problems import SignInRefused
from app.core.database import utcnow
from app.core.errors import Forbidden
from app.courses.models import Course, Lab, Role
from app.lti import scores
from app.lti.models import LtiContext, LtiPlatform, LtiResourceLink
from app.lti.registrations import tool_urls
from app.lti.roles import apply_role, role_from
from app.lti.tool import (
    CookieJar,
    DatabaseToolConf,
    ToolLaunch,
    ToolLogin,
    ToolRequest,
    session_service,
)
from app.users.models import User, UserIdentity
from app.users.service import find_user

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
MESSAGE_TYPE = CLAIM + "message_type"
DEPLOYMENT = CLAIM + "deployment_id"
CONTEXT = CLAIM + "context"
RESOURCE_LINK = CLAIM + "resource_link"
ROLES = CLAIM + "roles"
CUSTOM = CLAIM + "custom"
NRPS = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
AGS = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
DEEP_LINKING = "https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"

# A deep-linking pick, or a launch waiting for its person to log in once, keeps this long.
PENDING_SECONDS = 3600
# The cookie that ties a launch waiting for a login to the browser that made it.
BROWSER_COOKIE = "kg-lti-browser"

__all__ = ["role_from", "tool_urls"]


@dataclass(frozen=True)
class Filing:
    """Where a refusal is kept: under the registration (for site administrators) and the
    course its LMS course is linked to (for that course's staff)."""

    platform_id: int | None = None
    course_id: int | None = None


def filing(session: Session, claims: dict[str, Any], *, client_id: str = "") -> Filing:
    """A refusal is kept only when it names a registration and one of its deployments (what
    anyone can post is logged, not stored)."""
    aud = claims.get("aud")
    client = client_id or str((aud[0] if isinstance(aud, list) and aud else aud) or "")
    platform = DatabaseToolConf(session).platform(str(claims.get("iss", "")), client or None)
    deployment = str(claims.get(DEPLOYMENT) or claims.get("lti_deployment_id") or "")
    if platform is None or deployment not in (platform.deployment_ids or []):
        return Filing()
    context_id = str((claims.get(CONTEXT) or {}).get("id") or "")
    course_id = session.scalar(
        select(LtiContext.course_id).where(
            LtiContext.platform_id == platform.id,
            LtiContext.deployment_id == deployment,
            LtiContext.context_id == context_id,
        )
    )
    return Filing(platform_id=platform.id, course_id=course_id)


def _refused(sentence: str, detail: str, where: Filing, source: str) -> SignInRefused:
    return SignInRefused(
        sentence,
        detail,
        kind="lti",
        source=source,
        platform_id=where.platform_id,
        course_id=where.course_id,
    )


# --- the login -----------------------------------------------------------------------------


def login(session: Session, *, params: dict[str, str], cookies: CookieJar, secure: bool) -> str:
    """The URL of the LMS's authorization endpoint to send the browser to."""
    request = ToolRequest(params, secure=secure)
    oidc = ToolLogin(
        request,
        DatabaseToolConf(session),
        session_service=session_service(session, request),
        cookie_service=cookies,
    )
    try:
        return oidc.authorization_url(tool_urls()["launch"])
    except (OIDCException, LtiException) as exc:
        iss, client = params.get("iss", ""), params.get("client_id", "")
        raise _refused(
            "This LMS is not registered with kernelgrader, so the link cannot open; ask your "
            "LMS's administrator to have it registered by kernelgrader's site administrator.",
            f"login refused by pylti1p3: {exc}; issuer {iss[:200]!r}, client id "
            f"{client[:200]!r}, parameters {sorted(params)[:20]}",
            filing(session, {"iss": iss, **params}, client_id=client),
            iss,
        ) from None


# --- the launch ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Landing:
    """Where a launch goes: a page to redirect to, with the user logged in (or not)."""

    target: str
    user_id: int | None = None


def _refusal(exc: Exception, claims: dict[str, Any], where: Filing) -> SignInRefused:
    """pylti1p3's reason, told to the person as what happened and what to do."""
    text = str(exc)
    iss = str(claims.get("iss", ""))
    detail = (
        f"{type(exc).__name__}: {text[:500]}; iss {iss[:200]!r}, aud {claims.get('aud')!r:.200}"
    )
    if isinstance(exc, LtiInvalidNonceException):
        sentence = (
            "This launch was already used or has expired, so it was refused; go back to your "
            "LMS and open the link again."
        )
    elif "state" in text.lower():
        sentence = (
            "This launch does not match a sign-in started from your LMS in this browser (it "
            "may have been opened twice or taken too long); open the link again from the LMS."
        )
    elif "expired" in text.lower():
        sentence = (
            "This launch from your LMS expired before it arrived, so it was refused; open the "
            "link again from the LMS."
        )
    elif "is missing the" in text and "claim" in text:  # PyJWT's MissingRequiredClaimError
        sentence = (
            "This launch from your LMS lacks its expiry or issue time, so it was refused; tell "
            "your LMS's administrator."
        )
    elif isinstance(exc, LtiKeyException) or "decode id_token" in text:
        sentence = (
            "This launch is not signed by your LMS's key, so it was refused and nothing was "
            "done; open the link again from the LMS, and tell your course staff if it keeps "
            "happening."
        )
    elif "registration" in text.lower() or "client id" in text.lower():
        sentence = (
            "This launch came from an LMS registration kernelgrader does not know (or was "
            "meant for another tool), so it was refused; ask your LMS's administrator to "
            "check the registration with kernelgrader's site administrator."
        )
    elif "deployment" in text.lower():
        sentence = (
            "This launch came from an LMS deployment that is not registered here, so it was "
            "refused; ask kernelgrader's site administrator to add its deployment id."
        )
    else:
        sentence = (
            "This launch from your LMS could not be accepted, so nothing was done; open the "
            "link again, and tell your course staff if it keeps happening."
        )
    return _refused(sentence, detail, where, iss)


def launch(
    session: Session,
    *,
    params: dict[str, str],
    cookies: CookieJar,
    secure: bool,
    key_sets: dict[str, Any],
    unverified: dict[str, Any],
    browser: str,
) -> Landing:
    """Check the launch, then find or make the person, their course link and role. `browser`
    is the value of this browser's cookie, tying a launch that waits for a login to it."""
    request = ToolRequest(params, secure=secure)
    conf = DatabaseToolConf(session, key_sets)
    message = ToolLaunch(
        request, conf, session_service=session_service(session, request), cookie_service=cookies
    )
    try:
        message.validate()
    except (LtiException, OIDCException) as exc:
        raise _refusal(exc, unverified, filing(session, unverified)) from None
    claims: dict[str, Any] = dict(message.get_launch_data())
    platform = conf.platform(claims["iss"], message.get_client_id())
    assert platform is not None  # validate() found its registration
    aud = claims.get("aud")
    if isinstance(aud, list) and len(aud) > 1 and claims.get("azp") != platform.client_id:
        # OpenID Connect: a token for several audiences names the one it was given to.
        raise _refusal(
            LtiException("client id: azp does not name this tool"),
            claims,
            filing(session, claims, client_id=platform.client_id),
        )
    return _land(session, platform=platform, claims=claims, browser=browser)


def _land(
    session: Session, *, platform: LtiPlatform, claims: dict[str, Any], browser: str
) -> Landing:
    where = filing(session, claims, client_id=platform.client_id)

    def refuse(sentence: str, detail: str) -> SignInRefused:
        return _refused(sentence, detail, where, platform.issuer)

    context_claim = claims.get(CONTEXT) or {}
    if not context_claim.get("id"):
        raise refuse(
            "This link was placed outside a course in your LMS; kernelgrader needs it inside "
            "the course whose students use it. Ask your course staff to move it.",
            f"launch without a context claim; message type {claims.get(MESSAGE_TYPE)!r:.100}",
        )
    role = role_from(list(claims.get(ROLES) or []))
    if role is None:
        raise refuse(
            "Your role in this LMS course has no place in kernelgrader (it takes learners, "
            "teaching assistants and instructors); ask your course staff if this is wrong.",
            f"no context role it knows in {claims.get(ROLES)!r:.500}",
        )
    deep_linking = claims.get(MESSAGE_TYPE) == "LtiDeepLinkingRequest"
    if deep_linking and role is Role.student:
        raise refuse(
            "Only the course's staff can choose which lab a link opens.",
            "deep-linking request from a learner",
        )
    deployment = str(claims.get(DEPLOYMENT, ""))
    context = session.scalar(
        select(LtiContext).where(
            LtiContext.platform_id == platform.id,
            LtiContext.deployment_id == deployment,
            LtiContext.context_id == str(context_claim["id"]),
        )
    )
    identity = _identity(platform, claims)
    pending: dict[str, Any] = {
        "platform_id": platform.id,
        "deployment_id": deployment,
        "context": {
            "id": str(context_claim["id"])[:500],
            "title": str(context_claim.get("title") or context_claim.get("label") or "")[:500],
        },
        "services": _services(claims),
        "role": role.value,
        "identity": identity.__dict__,
        "claims": _kept_claims(claims),
        "browser": _digest(browser),
    }
    if context is None or context.course_id is None:
        if role is not Role.instructor:
            raise refuse(
                "This LMS course is not connected to a kernelgrader course yet; ask its "
                "instructor to open this link once from the LMS and connect it to their "
                "kernelgrader course, then try again.",
                f"context {str(context_claim['id'])[:200]!r} is linked to no course",
            )
        # The LMS says they teach this LMS course; kernelgrader asks them to show, with
        # their own login, that they teach the course it is to open.
        return Landing(target=f"/lti/continue/{_pend(session, pending)}")
    _note_services(context, pending)
    pending["context_id"] = context.id
    known = known_account(session, identity)
    if known is None:
        # An account has this email: its owner logs in once to join their LMS sign-in to
        # it (so one person never ends up with two accounts, and no LMS opens it alone).
        return Landing(target=f"/lti/continue/{_pend(session, pending)}")
    return Landing(target=finish(session, pending=pending, user=known.user), user_id=known.user.id)


def _services(claims: dict[str, Any]) -> dict[str, Any]:
    nrps = claims.get(NRPS) or {}
    ags = claims.get(AGS) or {}
    return {
        "memberships_url": str(nrps.get("context_memberships_url") or "")[:1000],
        "lineitems_url": str(ags.get("lineitems") or "")[:1000],
        "ags_scopes": [str(s)[:200] for s in (ags.get("scope") or [])][:20],
    }


def _note_services(context: LtiContext, pending: dict[str, Any]) -> None:
    """The services the latest launch offered, and the LMS course's title."""
    services = pending["services"]
    if pending["context"]["title"]:
        context.title = pending["context"]["title"]
    if services["memberships_url"]:
        context.memberships_url = services["memberships_url"]
    if services["lineitems_url"]:
        context.lineitems_url = services["lineitems_url"]
        context.ags_scopes = services["ags_scopes"]


def _identity(platform: LtiPlatform, claims: dict[str, Any]) -> OutsideIdentity:
    name = claims.get("name") or " ".join(
        str(claims.get(part, "")) for part in ("given_name", "family_name")
    )
    return OutsideIdentity(
        kind="lti",
        issuer=platform.issuer,
        subject=str(claims.get("sub", ""))[:500],
        email=str(claims.get("email") or "")[:320],
        name=str(name or "").strip()[:200],
        registration_id=platform.id,
    )


def known_account(session: Session, identity: OutsideIdentity) -> Matched | None:
    """The person's account when it is known without asking them: matched before (this
    registration, this `sub`), or a new one when no account has their email. None: an
    account has it, and only its owner, logging in, joins the two."""
    matched = session.scalar(select(UserIdentity.user_id).where(*identity_key(identity)))
    if matched is not None or not identity.email:
        return account_for(session, identity)
    if find_user(session, email=identity.email) is not None:
        return None
    return account_for(session, OutsideIdentity(**{**identity.__dict__, "email_as_address": True}))


def _kept_claims(claims: dict[str, Any]) -> dict[str, Any]:
    keep = (MESSAGE_TYPE, DEPLOYMENT, RESOURCE_LINK, CUSTOM, AGS, DEEP_LINKING, "iss", "sub")
    return {key: claims[key] for key in keep if key in claims}


def _digest(browser: str) -> str:
    return hashlib.sha256(browser.encode()).hexdigest() if browser else ""


def _pend(session: Session, pending: dict[str, Any]) -> str:
    key = secrets.token_urlsafe(24)
    states.put(session, f"lti-pending-{key}", pending, seconds=PENDING_SECONDS)
    return key


def pending_launch(session: Session, key: str, *, browser: str) -> dict[str, Any] | None:
    """A launch waiting for its person, in the browser that made it only: a link to it
    opened elsewhere (sent to someone else, say) finds nothing."""
    found = states.peek(session, f"lti-pending-{key}")
    if not isinstance(found, dict) or not browser:
        return None
    if not secrets.compare_digest(str(found.get("browser") or ""), _digest(browser)):
        return None
    return found


def finish(session: Session, *, pending: dict[str, Any], user: User) -> str:
    """The launch's account is known: enrol it with its LMS role, tie the link to its lab,
    note the grade column and the roster to sync, and say where to go."""
    context = session.get_one(LtiContext, pending["context_id"])
    identity = OutsideIdentity(**pending["identity"])
    matched = session.scalar(select(UserIdentity).where(*identity_key(identity)))
    if matched is not None and matched.user_id != user.id:
        raise Forbidden(
            "This LMS sign-in already opens another kernelgrader account; log out, and open "
            "the link again from the LMS."
        )
    if matched is None:
        session.add(
            UserIdentity(
                user_id=user.id,
                kind=identity.kind,
                platform_id=identity.registration_id,
                issuer=identity.issuer,
                subject=identity.subject,
                email=identity.email.lower(),
            )
        )
        session.flush()
    course = session.get_one(Course, context.course_id)
    role = apply_role(session, user=user, course=course, role=Role(pending["role"]))
    claims = pending["claims"]
    context.roster_wanted_at = utcnow()
    if claims.get(MESSAGE_TYPE) == "LtiDeepLinkingRequest":
        key = _pend(session, {**pending, "user_id": user.id})
        return f"/lti/deep-link/{key}"
    lab = _lab_of_link(session, context=context, course=course, claims=claims)
    if lab is not None:
        ags = claims.get(AGS) or {}
        if context.lineitems_url or ags.get("lineitem"):
            scores.want_line_item(
                session, context=context, lab=lab, url=str(ags.get("lineitem") or "")
            )
    if role is Role.student:
        scores.refresh_student(session, context=context, user_id=user.id)
    if lab is not None:
        return f"/courses/{course.slug}/labs/{lab.slug}"
    return f"/courses/{course.slug}"


def _lab_of_link(
    session: Session, *, context: LtiContext, course: Course, claims: dict[str, Any]
) -> Lab | None:
    """The lab a resource link opens: the one it was tied to, else its custom `lab`
    parameter (written by deep linking, or by hand in the LMS); None: the course page."""
    link_claim = claims.get(RESOURCE_LINK) or {}
    if not link_claim.get("id"):
        return None
    link = session.scalar(
        select(LtiResourceLink).where(
            LtiResourceLink.context_id == context.id,
            LtiResourceLink.resource_link_id == str(link_claim["id"]),
        )
    )
    if link is None:
        link = LtiResourceLink(context_id=context.id, resource_link_id=str(link_claim["id"]))
        session.add(link)
    link.title = str(link_claim.get("title") or "")[:500]
    slug = str((claims.get(CUSTOM) or {}).get("lab") or "").strip()
    if slug:
        lab = session.scalar(select(Lab).where(Lab.course_id == course.id, Lab.slug == slug))
        if lab is not None:
            link.lab_id = lab.id
    session.flush()
    if link.lab_id is None:
        return None
    lab = session.get(Lab, link.lab_id)
    return lab if lab is not None and lab.course_id == course.id else None
