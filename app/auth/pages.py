"""Signing in, and the account's pages: logging in and out; one's password, sessions and API
tokens; the invite links that set a password; and "forgot password", which mails such a link
where the server sends mail. A new password (changed here, or set through a link) signs the
account out everywhere else and revokes its API tokens (app.users.passwords); "sign out
everywhere" ends every session.

What signing in from outside (LTI, single sign-on) shares is here too: the page of a refused
sign-in, whether the `sso` extra is installed (app.main mounts their routes, or pages that say
how to install it), and where a sign-in may send the browser next (a path on this site only).

As every page, a handler's database work (rendering included) is one function handed to
`web.run` or, before anyone is logged in, `db.run` (app.web.deps).
"""

from __future__ import annotations

import importlib.util
import ipaddress
from collections.abc import Mapping
from typing import Annotated, Any, Protocol
from urllib.parse import quote, urlsplit

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from app.auth import new_tokens
from app.auth.problems import SignInRefused, record
from app.core.database import utcnow
from app.core.errors import DomainError, Invalid
from app.core.overload import database_unavailable
from app.core.settings import get_settings
from app.people.links import accept_link, live_invite
from app.users.invites import change_password
from app.users.models import User
from app.users.passwords import end_sessions
from app.users.resets import reset_requests
from app.users.service import (
    authenticate,
    create_api_token,
    normalize_email,
    revoke_own_token,
    tokens_of,
)
from app.web.deps import PublicDb, RowId, WebDb, start_session
from app.web.forms import PostedForm, back_to, refused
from app.web.panels import Panels
from app.web.templating import check_csrf, render

router = APIRouter(include_in_schema=False)

SIGNED_OUT = (
    "You are signed out everywhere: every browser that was logged in to your account must log "
    "in again. Your API tokens still work; revoke any that may have leaked on your account page."
)


ASK_THE_STAFF = (
    "This server sends no e-mail, so it cannot mail you a link. If you sign in through your "
    "university or your LMS, do that instead. Otherwise ask your course staff for a link to "
    "set a new password: they, or whoever runs this kernelgrader server, can make you one."
)

MISSING = (
    "University sign-in (LTI 1.3 and single sign-on) is not installed on this server; install "
    "kernelgrader[sso] (and Debian's xmlsec1 for SAML), then restart it."
)


async def refused_page(request: Request, db: PublicDb, refused: SignInRefused) -> Response:
    """A refused sign-in or launch: recorded for staff, told to the person with its reference."""
    reference = await db.run(lambda session: record(session, refused))
    return render(
        request,
        "sign_in/refused.html",
        {"sentence": refused.sentence, "reference": reference},
        status_code=refused.status_code,
    )


def installed() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("pylti1p3", "authlib", "saml2"))


def safe_next(target: str | None) -> str:
    # Only local paths, so the login form cannot bounce a user to another site.
    if not target or not target.startswith("/") or target.startswith("//"):
        return "/"
    # Browsers read a backslash as "/" and drop tabs and newlines once a URL is unquoted, so
    # such a path could leave the site; none of ours has them.
    if "\\" in target or any(ord(c) < 32 or ord(c) == 127 for c in target):
        return "/"
    parts = urlsplit(target)
    return "/" if parts.scheme or parts.netloc else target


def client_network(host: str) -> str:
    """The address a login failure counts against: IPv4 as is, IPv6 by its /64 network.

    An IPv6 host is handed a whole /64 and can pick a fresh address for every guess.
    """
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host or "unknown"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class SignInWay(Protocol):
    """What the login page offers besides a password: a university's sign-in (app.sso), an
    LMS (app.lti), each added by its feature where it is mounted, so that the page offers a
    way only where one is set up."""

    def __call__(self, session: Session) -> Mapping[str, object]: ...


sign_in_ways: Panels[SignInWay] = Panels("login")


async def _ways(db: PublicDb) -> dict[str, object]:
    try:
        return await db.run(lambda session: sign_in_ways.context(session=session))
    except Exception as exc:
        if not database_unavailable(exc):
            raise
        # The login page needs no database: while it is away, the password form alone.
        return {}


@router.get("/login", response_class=HTMLResponse)
async def login_form(
    request: Request, db: PublicDb, next: str = "/", signed_out: bool = False
) -> Response:
    notice = SIGNED_OUT if signed_out else ""
    context = {"next": safe_next(next), "error": None, "notice": notice, **await _ways(db)}
    return render(request, "login.html", context)


@router.post("/login", response_class=HTMLResponse)
async def login(
    request: Request,
    db: PublicDb,
    email: Annotated[str, Form()],
    password: Annotated[str, Form()],
    csrf_token: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/",
) -> Response:
    check_csrf(request, csrf_token)
    # Throttle guessing per account from one address, and per address, before spending time on
    # the hash. Not per account alone: a stranger's guesses would lock its owner out everywhere.
    network = client_network(request.client.host if request.client else "")
    account = f"account:{email.strip().lower()}|{network}"
    address = "address:" + network
    throttle, address_throttle = (
        request.app.state.login_throttle,
        request.app.state.login_address_throttle,
    )
    wait = max(throttle.retry_after(account), address_throttle.retry_after(address))
    form = PostedForm({"email": email})
    ways = await _ways(db)

    def context() -> dict[str, Any]:
        return {"next": safe_next(next), "notice": "", **ways}

    if wait:
        form.refuse(
            "", f"Too many failed logins; wait {wait} seconds, then try again.", status_code=429
        )
        page = form.refused(request, None, "login.html", context)
        page.headers["Retry-After"] = str(wait)
        return page
    # The password hash is slow on purpose: in a request thread, never on the event loop.
    user = await db.run(lambda session: authenticate(session, email=email, password=password))
    if user is None:
        throttle.failed(account)
        address_throttle.failed(address)
        form.refuse("", "That email and password do not match; try again.", status_code=401)
        return form.refused(request, None, "login.html", context)
    throttle.succeeded(account)
    start_session(request, user.id)
    return RedirectResponse(safe_next(next), status_code=303)


@router.post("/logout")
async def logout(request: Request, csrf_token: Annotated[str, Form()] = "") -> Response:
    check_csrf(request, csrf_token)
    request.session.clear()
    return RedirectResponse("/login", status_code=303)


def _account(session: Session, user: User, **extra: Any) -> dict[str, Any]:
    return {
        "me": user,
        "tokens": tokens_of(session, user=user),
        "new_token": None,
        "message": "",
        "error": None,
        **extra,
    }


@router.get("/account", response_class=HTMLResponse)
async def account_page(request: Request, web: WebDb, message: str = "") -> Response:
    def page(session: Session, user: User) -> Response:
        token = new_tokens.take(session, request.session, user_id=user.id)
        context = _account(session, user, message=message[:200], new_token=token)
        shown = render(request, "account.html", context)
        if token is not None:
            shown.headers["Cache-Control"] = "no-store"  # the token must not sit in a cache
        return shown

    return await web.run(page)


@router.post("/account/password", response_class=HTMLResponse)
async def change_password_form(
    request: Request,
    web: WebDb,
    current: Annotated[str, Form()],
    password: Annotated[str, Form()],
    confirm: Annotated[str, Form()],
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> tuple[Response, int | None]:
        check_csrf(request, csrf_token)
        form = PostedForm()
        revoked = form.attempt(
            lambda: change_password(
                session,
                user=user,
                current=current,
                password=password,
                confirm=confirm,
                now=utcnow(),
            )
        )
        if revoked is None:
            return form.refused(
                request, session, "account.html", lambda: _account(session, user)
            ), None
        text = (
            "Your password was changed: every other browser logged in to your account is signed "
            f"out, and {_tokens(revoked)} revoked."
        )
        return RedirectResponse(f"/account?message={quote(text)}", status_code=303), user.id

    page, changed = await web.run(work)
    if changed is not None:
        # Once committed: the sessions before the change are over, this browser's begins anew.
        start_session(request, changed)
    return page


def _tokens(count: int) -> str:
    if count == 0:
        return "you had no API tokens to revoke"
    return f"your {count} API token{'s were' if count != 1 else ' was'}"


@router.post("/account/sessions/end")
async def sign_out_everywhere(
    request: Request, web: WebDb, csrf_token: Annotated[str, Form()] = ""
) -> Response:
    """End every login session of the account, this browser's too; API tokens stay."""

    def work(session: Session, user: User) -> None:
        check_csrf(request, csrf_token)
        end_sessions(session, user=user, now=utcnow())

    await web.run(work)
    request.session.clear()
    return RedirectResponse("/login?signed_out=1", status_code=303)


@router.post("/account/tokens", response_class=HTMLResponse)
async def create_token_form(
    request: Request,
    web: WebDb,
    name: Annotated[str, Form()],
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """A new API token, shown once on the page the redirect leads to (app.auth.new_tokens), so
    that reloading that page makes no second one."""

    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        label = name.strip()
        try:
            if not label:
                raise Invalid("Name the token (say, 'laptop' or 'CI'), so you can tell it apart.")
            token = create_api_token(session, user=user, name=label)
        except DomainError as exc:
            return refused(request, session, exc, "account.html", lambda: _account(session, user))
        new_tokens.hold(session, request.session, user_id=user.id, token=token)
        return back_to("/account", f"Created the token {label}.")

    return await web.run(work)


@router.post("/account/tokens/{token_id}/revoke")
async def revoke_token_form(
    request: Request,
    token_id: RowId,
    web: WebDb,
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        row = revoke_own_token(session, user=user, token_id=token_id)
        text = f"Revoked the token {row.name or row.id}: it stops working at once."
        return RedirectResponse(f"/account?message={text.replace(' ', '+')}", status_code=303)

    return await web.run(work)


@router.get("/invite/{token}", response_class=HTMLResponse)
async def invite_page(request: Request, token: str, db: PublicDb) -> Response:
    def page(session: Session) -> Response:
        try:
            invite, who = live_invite(session, token=token, now=utcnow())
        except DomainError as exc:
            context = {"who": None, "error": exc.message}
            return render(request, "invite.html", context, status_code=404)
        return render(
            request, "invite.html", {"who": who, "expires_at": invite.expires_at, "error": None}
        )

    return await db.run(page)


@router.post("/invite/{token}", response_class=HTMLResponse)
async def accept_invite_form(
    request: Request,
    token: str,
    db: PublicDb,
    password: Annotated[str, Form()],
    confirm: Annotated[str, Form()],
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    check_csrf(request, csrf_token)

    def work(session: Session) -> int | Response:
        now = utcnow()
        try:
            user = accept_link(session, token=token, password=password, confirm=confirm, now=now)
        except DomainError as exc:
            session.rollback()
            try:
                invite, who = live_invite(session, token=token, now=now)
                context = {"who": who, "expires_at": invite.expires_at, "error": exc.message}
            except DomainError:
                context = {"who": None, "error": exc.message}
            return render(request, "invite.html", context, status_code=exc.status_code)
        return user.id

    outcome = await db.run(work)
    if isinstance(outcome, Response):
        return outcome
    # Only once the password is committed: a fresh session, as at every login.
    start_session(request, outcome)
    return RedirectResponse("/", status_code=303)


def _sent_sentence(minutes: int) -> str:
    # The same whether or not the address has an account: the page tells nobody who has one.
    return (
        "If an account uses that address, a link to set a new password is on its way to it. "
        f"It works once, for {minutes} minutes; look in your spam folder too. Setting a new "
        "password signs you out everywhere else and revokes your API tokens."
    )


@router.get("/password/forgot", response_class=HTMLResponse)
async def forgot_page(request: Request) -> Response:
    settings = get_settings()
    return render(
        request,
        "forgot.html",
        {"mail": settings.mail_enabled, "ask_staff": ASK_THE_STAFF, "sent": None, "error": None},
    )


@router.post("/password/forgot", response_class=HTMLResponse)
async def forgot_form(
    request: Request,
    email: Annotated[str, Form()],
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """The same steps whatever the address: no table is read here (app.users.resets)."""
    check_csrf(request, csrf_token)
    settings = get_settings()
    context: dict[str, Any] = {
        "mail": settings.mail_enabled,
        "ask_staff": ASK_THE_STAFF,
        "sent": None,
        "error": None,
    }
    if not settings.mail_enabled:
        return render(request, "forgot.html", context, status_code=503)
    form = PostedForm({"email": email})
    address = form.read("email", normalize_email)
    if address is None:
        return form.refused(request, None, "forgot.html", lambda: context)
    # Each request counts, per address and per client network: mail is not a free channel.
    checks = (
        (request.app.state.reset_throttle, "account:" + address),
        (
            request.app.state.reset_address_throttle,
            "address:" + client_network(request.client.host if request.client else ""),
        ),
    )
    wait = max(throttle.retry_after(key) for throttle, key in checks)
    if wait:
        context["error"] = f"Too many reset requests; wait {wait} seconds, then try again."
        page = render(request, "forgot.html", context, status_code=429)
        page.headers["Retry-After"] = str(wait)
        return page
    for throttle, key in checks:
        throttle.failed(key)
    reset_requests.ask(address)
    context["sent"] = _sent_sentence(settings.password_reset_minutes)
    return render(request, "forgot.html", context)
