"""An LTI 1.3 launch: checked by pylti1p3, then the person, their course, role and lab.

The order is the protocol's: the LMS starts a login (`login`), the browser comes back with a
signed id_token (`launch`), which pylti1p3 checks against the state and nonce stored at the
login, the LMS's key set, the registration and the deployment. Only a launch that passes
every check creates or changes anything; a refused one is told in a sentence and logged
(app.auth.problems) and leaves nothing behind.
"""

from __future__ import annotations

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
from app.auth.accounts import Matched, OutsideIdentity, account_for
from app.auth.models import UserIdentity
from app.auth.problems import SignInRefused
from app.core.database import utcnow
from app.core.errors import Forbidden
from app.core.settings import get_settings
from app.courses.models import Course, Enrollment, Lab, Role
from app.courses.service import enroll
from app.lti import scores
from app.lti.models import LtiContext, LtiPlatform, LtiResourceLink
from app.lti.tool import (
    CookieJar,
    DatabaseToolConf,
    ToolLaunch,
    ToolLogin,
    ToolRequest,
    session_service,
)
from app.users.models import User
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


def tool_urls() -> dict[str, str]:
    """What staff copy into the LMS."""
    base = get_settings().public_url.rstrip("/")
    return {
        "login": f"{base}/lti/login",
        "launch": f"{base}/lti/launch",
        "jwks": f"{base}/lti/jwks",
        "deep_linking": f"{base}/lti/launch",
        "domain": base.split("://", 1)[-1].split("/", 1)[0],
    }


def role_from(claims: list[str]) -> Role | None:
    """The course role an LMS gives, by the LTI role vocabulary (context roles first)."""
    names = {str(uri).rsplit("/", 1)[-1] for uri in claims}  # e.g. "membership#Instructor"
    short = {name.rsplit("#", 1)[-1] for name in names}
    if "TeachingAssistant" in short:
        return Role.ta
    if short & {"Instructor", "Administrator", "ContentDeveloper"}:
        return Role.instructor
    if "Learner" in short or "Student" in short:
        return Role.student
    return None


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
        raise SignInRefused(
            "This LMS is not registered with kernelgrader, so the link cannot open; ask your "
            "course staff to register it on the course's LMS page.",
            f"login refused by pylti1p3: {exc}; issuer {iss!r}, client id {client!r}, "
            f"parameters {sorted(params)}",
            kind="lti",
            source=iss,
        ) from None


# --- the launch ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Landing:
    """Where a launch goes: a page to redirect to, with the user logged in (or not)."""

    target: str
    user_id: int | None = None


def _refusal(exc: Exception, claims: dict[str, Any]) -> SignInRefused:
    """pylti1p3's reason, told to the person as what happened and what to do."""
    text = str(exc)
    iss = str(claims.get("iss", ""))
    detail = f"{type(exc).__name__}: {text}; iss {iss!r}, aud {claims.get('aud')!r}"
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
    elif isinstance(exc, LtiKeyException) or "decode id_token" in text:
        sentence = (
            "This launch is not signed by your LMS's key, so it was refused and nothing was "
            "done; open the link again from the LMS, and tell your course staff if it keeps "
            "happening."
        )
    elif "registration" in text.lower() or "client id" in text.lower():
        sentence = (
            "This launch came from an LMS registration kernelgrader does not know (or was "
            "meant for another tool), so it was refused; ask your course staff to check the "
            "registration on the course's LMS page."
        )
    elif "deployment" in text.lower():
        sentence = (
            "This launch came from an LMS deployment that is not registered here, so it was "
            "refused; ask your course staff to add its deployment id on the course's LMS page."
        )
    else:
        sentence = (
            "This launch from your LMS could not be accepted, so nothing was done; open the "
            "link again, and tell your course staff if it keeps happening."
        )
    return SignInRefused(sentence, detail, kind="lti", source=iss)


def launch(
    session: Session,
    *,
    params: dict[str, str],
    cookies: CookieJar,
    secure: bool,
    key_sets: dict[str, Any],
    unverified: dict[str, Any],
) -> Landing:
    """Check the launch, then find or make the person, their course link and role."""
    request = ToolRequest(params, secure=secure)
    conf = DatabaseToolConf(session, key_sets)
    message = ToolLaunch(
        request, conf, session_service=session_service(session, request), cookie_service=cookies
    )
    try:
        message.validate()
    except (LtiException, OIDCException) as exc:
        raise _refusal(exc, unverified) from None
    claims: dict[str, Any] = dict(message.get_launch_data())
    platform = conf.platform(claims["iss"], message.get_client_id())
    assert platform is not None  # validate() found its registration
    aud = claims.get("aud")
    if isinstance(aud, list) and len(aud) > 1 and claims.get("azp") != platform.client_id:
        # OpenID Connect: a token for several audiences names the one it was given to.
        raise _refusal(LtiException("client id: azp does not name this tool"), claims)
    return _land(session, platform=platform, claims=claims)


def _land(session: Session, *, platform: LtiPlatform, claims: dict[str, Any]) -> Landing:
    context_claim = claims.get(CONTEXT) or {}
    if not context_claim.get("id"):
        raise SignInRefused(
            "This link was placed outside a course in your LMS; kernelgrader needs it inside "
            "the course whose students use it. Ask your course staff to move it.",
            f"launch without a context claim; message type {claims.get(MESSAGE_TYPE)!r}",
            kind="lti",
            source=platform.issuer,
        )
    role = role_from(list(claims.get(ROLES) or []))
    if role is None:
        raise SignInRefused(
            "Your role in this LMS course has no place in kernelgrader (it takes learners, "
            "teaching assistants and instructors); ask your course staff if this is wrong.",
            f"roles {claims.get(ROLES)!r}",
            kind="lti",
            source=platform.issuer,
        )
    context = _context_row(session, platform=platform, claims=claims, claim=context_claim)
    identity = _identity(platform, claims)
    course = session.get(Course, context.course_id) if context.course_id else None
    deep_linking = claims.get(MESSAGE_TYPE) == "LtiDeepLinkingRequest"
    if deep_linking and role is Role.student:
        raise SignInRefused(
            "Only the course's staff can choose which lab a link opens.",
            "deep-linking request from a learner",
            kind="lti",
            source=platform.issuer,
        )
    known = known_account(session, identity, course)
    user = known.user if known else None
    pending = {
        "platform_id": platform.id,
        "context_id": context.id,
        "role": role.value,
        "identity": identity.__dict__,
        "claims": _kept_claims(claims),
    }
    if course is None:
        if role is Role.student:
            raise SignInRefused(
                "Your instructor has not connected this LMS course to kernelgrader yet; ask "
                "them to open the link once themselves, then try again.",
                f"context {context.context_id!r} ({context.title!r}) is linked to no course",
                kind="lti",
                source=platform.issuer,
            )
        # Staff connect it to a course they teach (or make one), then go on.
        key = _pend(session, pending)
        return Landing(target=f"/lti/continue/{key}", user_id=user.id if user else None)
    if user is None:
        # An account has this email but is not in this course: the person logs in once to
        # join their LMS sign-in to it (so one person never ends up with two accounts).
        return Landing(target=f"/lti/continue/{_pend(session, pending)}")
    return Landing(target=finish(session, pending=pending, user=user), user_id=user.id)


def _context_row(
    session: Session, *, platform: LtiPlatform, claims: dict[str, Any], claim: dict[str, Any]
) -> LtiContext:
    deployment = str(claims.get(DEPLOYMENT, ""))
    context = session.scalar(
        select(LtiContext).where(
            LtiContext.platform_id == platform.id,
            LtiContext.deployment_id == deployment,
            LtiContext.context_id == str(claim["id"]),
        )
    )
    if context is None:
        context = LtiContext(
            platform_id=platform.id,
            deployment_id=deployment,
            context_id=str(claim["id"]),
            course_id=platform.course_id,
        )
        session.add(context)
    context.title = str(claim.get("title") or claim.get("label") or "")[:500]
    nrps = claims.get(NRPS) or {}
    if nrps.get("context_memberships_url"):
        context.memberships_url = str(nrps["context_memberships_url"])
    ags = claims.get(AGS) or {}
    if ags.get("lineitems"):
        context.lineitems_url = str(ags["lineitems"])
        context.ags_scopes = [str(s) for s in ags.get("scope") or []]
    session.flush()
    return context


def _identity(platform: LtiPlatform, claims: dict[str, Any]) -> OutsideIdentity:
    name = claims.get("name") or " ".join(
        str(claims.get(part, "")) for part in ("given_name", "family_name")
    )
    return OutsideIdentity(
        kind="lti",
        issuer=platform.issuer,
        subject=str(claims.get("sub", "")),
        email=str(claims.get("email") or ""),
        name=str(name or "").strip(),
        email_trusted=False,  # decided per course in _known_account
    )


def known_account(
    session: Session, identity: OutsideIdentity, course: Course | None
) -> Matched | None:
    """The person's account when it is known without asking them: matched before, or the
    account with their email in the course the launch leads to (its roster vouches), or none
    with that email at all (a new account). None: they log in once to join the two."""
    matched = session.scalar(
        select(UserIdentity.user_id).where(
            UserIdentity.kind == identity.kind,
            UserIdentity.issuer == identity.issuer,
            UserIdentity.subject == identity.subject,
        )
    )
    if matched is not None or not identity.email:
        return account_for(session, identity)
    existing = find_user(session, email=identity.email)
    if existing is None:
        return account_for(session, _trusted(identity))
    if course is not None and session.scalar(
        select(Enrollment.id).where(
            Enrollment.user_id == existing.id, Enrollment.course_id == course.id
        )
    ):
        return account_for(session, _trusted(identity))
    return None


def _trusted(identity: OutsideIdentity) -> OutsideIdentity:
    return OutsideIdentity(**{**identity.__dict__, "email_trusted": True})


def _kept_claims(claims: dict[str, Any]) -> dict[str, Any]:
    keep = (MESSAGE_TYPE, DEPLOYMENT, RESOURCE_LINK, CUSTOM, AGS, DEEP_LINKING, "iss", "sub")
    return {key: claims[key] for key in keep if key in claims}


def _pend(session: Session, pending: dict[str, Any]) -> str:
    key = secrets.token_urlsafe(24)
    states.put(session, f"lti-pending-{key}", pending, seconds=PENDING_SECONDS)
    return key


def pending_launch(session: Session, key: str) -> dict[str, Any] | None:
    found = states.peek(session, f"lti-pending-{key}")
    return found if isinstance(found, dict) else None


def finish(session: Session, *, pending: dict[str, Any], user: User) -> str:
    """The launch's account is known: enrol it with its LMS role, tie the link to its lab,
    note the grade column and the roster to sync, and say where to go."""
    context = session.get_one(LtiContext, pending["context_id"])
    identity = OutsideIdentity(**pending["identity"])
    matched = session.scalar(
        select(UserIdentity).where(
            UserIdentity.kind == identity.kind,
            UserIdentity.issuer == identity.issuer,
            UserIdentity.subject == identity.subject,
        )
    )
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
                issuer=identity.issuer,
                subject=identity.subject,
                email=identity.email.lower(),
            )
        )
        session.flush()
    course = session.get_one(Course, context.course_id)
    role = Role(pending["role"])
    enroll(session, user=user, course=course, role=role)
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


def staff_courses(session: Session, *, user: User) -> list[Course]:
    """Courses a person may connect an LMS course to: those they teach."""
    return list(
        session.scalars(
            select(Course)
            .join(Enrollment, Enrollment.course_id == Course.id)
            .where(Enrollment.user_id == user.id, Enrollment.role == Role.instructor.value)
            .order_by(Course.slug)
        )
    )
