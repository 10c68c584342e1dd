"""Accounts on the web: changing one's password, and the invite links that set one.

As every page, a handler's database work (rendering included) is one function handed to
`web.run` or, before anyone is logged in, `db.run` (app.core.deps).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.deps import PublicDb, WebDb
from app.core.errors import DomainError
from app.users.invites import accept_invite, change_password, find_invite
from app.users.models import User
from app.web.templating import check_csrf, render

router = APIRouter(include_in_schema=False)


@router.get("/account", response_class=HTMLResponse)
async def account_page(request: Request, web: WebDb, message: str = "") -> Response:
    def page(session: Session, user: User) -> Response:
        context = {"me": user, "message": message[:200], "error": None}
        return render(request, "account.html", context)

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
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        try:
            change_password(session, user=user, current=current, password=password, confirm=confirm)
        except DomainError as exc:
            session.rollback()
            page = {"me": user, "message": "", "error": exc.message}
            return render(request, "account.html", page, status_code=exc.status_code)
        return RedirectResponse("/account?message=Your+password+was+changed.", status_code=303)

    return await web.run(work)


@router.get("/invite/{token}", response_class=HTMLResponse)
async def invite_page(request: Request, token: str, db: PublicDb) -> Response:
    def page(session: Session) -> Response:
        try:
            invite, who = find_invite(session, token=token, now=utcnow())
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
            user = accept_invite(session, token=token, password=password, confirm=confirm, now=now)
        except DomainError as exc:
            session.rollback()
            try:
                invite, who = find_invite(session, token=token, now=now)
                context = {"who": who, "expires_at": invite.expires_at, "error": exc.message}
            except DomainError:
                context = {"who": None, "error": exc.message}
            return render(request, "invite.html", context, status_code=exc.status_code)
        return user.id

    outcome = await db.run(work)
    if isinstance(outcome, Response):
        return outcome
    # Only once the password is committed: a fresh session, as at every login.
    request.session.clear()
    request.session["user_id"] = outcome
    return RedirectResponse("/", status_code=303)
