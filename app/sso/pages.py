"""University sign-in: OpenID Connect and SAML 2.0, and the staff's page about sign-in.

As every handler, database work is a function handed to `db.run` / `web.run`; talking to the
provider (Authlib's token exchange, pysaml2's checks with xmlsec1) happens between hops.

A sign-in's answer is taken only in the browser that started it, so nobody can sign another
person's browser in as themselves (login CSRF) with an answer made for them: OpenID Connect's
state and nonce wait in that browser's login cookie (Authlib), and a SAML request's id waits in
the database beside the hash of a random cookie set at the start, which the identity
provider's post must bring back; over HTTPS that cookie's name has the __Host- prefix, so no
other host under the same site can plant one.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth import states
from app.auth.pages import refused_page, safe_next, sign_in_ways
from app.auth.problems import SignInRefused, recent
from app.core.public_address import public_address_problem
from app.core.settings import get_settings
from app.courses.models import Course
from app.sso.service import ProviderView, get_provider, map_attributes, providers, sign_in, urls
from app.users.models import User
from app.users.site_admins import require_site_admin
from app.web.deps import PublicDb, WebDb, start_session
from app.web.templating import render

router = APIRouter(include_in_schema=False)

SAML_STATE_SECONDS = 600
# The browser's mark for SAML sign-ins (random, HttpOnly). Over HTTPS its name has the
# __Host- prefix, which browsers let no other host (a sibling subdomain) set or overwrite.
BROWSER_COOKIE = "kernelgrader_sso"
OTHER_BROWSER = (
    "This answer from {name} belongs to a sign-in that was started in another browser (or this "
    "browser did not keep kernelgrader's cookie), so you were not signed in; start the sign-in "
    "again here."
)


def _cookie_name(request: Request) -> str:
    return f"__Host-{BROWSER_COOKIE}" if request.url.scheme == "https" else BROWSER_COOKIE


def _browser_mark(request: Request) -> str:
    # One mark per browser, kept across sign-ins, so two tabs signing in at once both finish.
    mark = request.cookies.get(_cookie_name(request), "")
    return mark if 32 <= len(mark) <= 64 else secrets.token_urlsafe(32)


def _digest(mark: str) -> str:
    return hashlib.sha256(mark.encode()).hexdigest()


def _set_browser_mark(request: Request, response: Response, mark: str) -> None:
    https = request.url.scheme == "https"
    # The identity provider posts the answer from its own site: over HTTPS the cookie must be
    # SameSite=None (which browsers take only with Secure) to come along; over plain HTTP no
    # SameSite is named, and browsers that default to Lax send it with such a post only in the
    # first two minutes (SECURITY.md, Known limits).
    response.set_cookie(
        _cookie_name(request),
        mark,
        max_age=SAML_STATE_SECONDS,
        httponly=True,
        secure=https,
        samesite="none" if https else None,
        path="/" if https else "/sso",  # a __Host- cookie must have the path /
    )


def _signed_in(request: Request, user_id: int, target: str) -> Response:
    start_session(request, user_id)
    return RedirectResponse(safe_next(target), status_code=303)


@sign_in_ways.add
def university_sign_in(session: Session) -> dict[str, object]:
    """The login page's links to the universities' sign-in: one per provider set up, or none."""
    return {"university": [(p.name, p.slug) for p in providers(session)]}


@router.get("/sso", response_class=HTMLResponse)
async def choose(request: Request, db: PublicDb, next: str = "/") -> Response:
    def page(session: Session) -> Response:
        return render(
            request,
            "sign_in/sso.html",
            {"providers": providers(session), "next": safe_next(next)},
        )

    return await db.run(page)


@router.get("/sso/{slug}/login")
async def start(request: Request, slug: str, db: PublicDb, next: str = "/") -> Response:
    provider: ProviderView = await db.run(lambda session: get_provider(session, slug=slug))
    try:
        if provider.kind == "oidc":
            from app.sso import oidc

            request.session["sso_next"] = safe_next(next)
            return await oidc.start(request, provider)
        from app.sso import saml

        relay = secrets.token_urlsafe(24)
        url, request_id = await anyio.to_thread.run_sync(
            lambda: saml.request_url(provider, relay_state=relay)
        )
    except SignInRefused as refused:
        return await refused_page(request, db, refused)
    mark = _browser_mark(request)
    await db.run(
        lambda session: states.put(
            session,
            f"saml-{relay}",
            {
                "provider": slug,
                "request_id": request_id,
                "next": safe_next(next),
                "browser": _digest(mark),
            },
            seconds=SAML_STATE_SECONDS,
        )
    )
    response = RedirectResponse(url, status_code=302)
    _set_browser_mark(request, response, mark)
    return response


@router.get("/sso/{slug}/callback")
async def oidc_callback(request: Request, slug: str, db: PublicDb) -> Response:
    from app.sso import oidc

    provider: ProviderView = await db.run(lambda session: get_provider(session, slug=slug))
    try:
        subject, issuer, claims = await oidc.finish(request, provider)
        identity = map_attributes(provider, subject=subject, attributes=claims, issuer=issuer)
    except SignInRefused as refused:
        return await refused_page(request, db, refused)
    user = await db.run(lambda session: sign_in(session, identity))
    return _signed_in(request, user.id, str(request.session.get("sso_next") or "/"))


@router.post("/sso/{slug}/saml/acs")
async def saml_acs(
    request: Request,
    slug: str,
    db: PublicDb,
    SAMLResponse: Annotated[str, Form()],  # noqa: N803 (the binding's field name)
    RelayState: Annotated[str, Form()] = "",  # noqa: N803
) -> Response:
    from app.sso import saml

    mark = request.cookies.get(_cookie_name(request), "")

    def take(session: Session) -> tuple[ProviderView, dict[str, Any] | None, bool]:
        provider = get_provider(session, slug=slug)
        waiting = states.peek(session, f"saml-{RelayState}") if RelayState else None
        if waiting is None:
            return provider, None, True
        # Left for the browser it belongs to, which may still post it.
        if not hmac.compare_digest(str(waiting.get("browser", "")), _digest(mark)):
            return provider, None, False
        if states.take(session, f"saml-{RelayState}"):
            return provider, waiting, True
        return provider, None, True

    provider, waiting, same_browser = await db.run(take)
    try:
        if not same_browser:
            raise SignInRefused(
                OTHER_BROWSER.format(name=provider.name),
                f"saml provider {slug}: RelayState {RelayState[:40]!r} was started in another "
                "browser (its cookie is missing or differs)",
                kind="saml",
                source=slug,
            )
        if waiting is None or waiting.get("provider") != slug:
            raise SignInRefused(
                f"This answer from {provider.name} does not match a sign-in started here (it "
                "may have been used already or taken too long); sign in again.",
                f"saml provider {slug}: RelayState {RelayState[:40]!r} unknown, used or expired",
                kind="saml",
                source=slug,
            )
        subject, issuer, attributes = await anyio.to_thread.run_sync(
            lambda: saml.read_answer(
                provider, saml_response=SAMLResponse, request_id=waiting["request_id"]
            )
        )
        identity = map_attributes(provider, subject=subject, attributes=attributes, issuer=issuer)
    except SignInRefused as refused:
        return await refused_page(request, db, refused)
    user = await db.run(lambda session: sign_in(session, identity))
    return _signed_in(request, user.id, waiting.get("next") or "/")


@router.get("/sso/{slug}/saml/metadata")
async def saml_metadata(slug: str, db: PublicDb) -> Response:
    from app.sso import saml

    provider: ProviderView = await db.run(lambda session: get_provider(session, slug=slug))
    text = await anyio.to_thread.run_sync(lambda: saml.sp_metadata(provider))
    return Response(text, media_type="application/samlmetadata+xml")


@router.get("/admin/sign-in", response_class=HTMLResponse)
async def admin_page(request: Request, web: WebDb) -> Response:
    """Providers with the values to give them, and the latest refused sign-ins in detail:
    every course's, so site administrators only (a course's staff read their own course's on
    its LMS page)."""

    def page(session: Session, user: User) -> Response:
        require_site_admin(user)
        rows = providers(session)
        problems = recent(session, limit=100)
        return render(
            request,
            "sign_in/admin.html",
            {
                "providers": [(p, urls(p.slug)) for p in rows],
                "problems": problems,
                "course_slugs": dict(
                    session.execute(
                        select(Course.id, Course.slug).where(
                            Course.id.in_({p.course_id for p in problems if p.course_id})
                        )
                    ).all()
                ),
                "keep_days": get_settings().sign_in_problem_days,
                "address_problem": public_address_problem(get_settings().public_url),
            },
        )

    return await web.run(page)
