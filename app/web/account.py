"""Accounts on the web: changing one's password, and the invite links that set one."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.core.database import utcnow
from app.core.deps import SessionDep
from app.core.errors import DomainError
from app.users.invites import accept_invite, change_password, find_invite
from app.web.routes import WebUser
from app.web.templating import check_csrf, render

router = APIRouter(include_in_schema=False)


@router.get("/account", response_class=HTMLResponse)
def account_page(request: Request, user: WebUser, message: str = "") -> Response:
    return render(request, "account.html", {"me": user, "message": message[:200], "error": None})


@router.post("/account/password", response_class=HTMLResponse)
def change_password_form(
    request: Request,
    session: SessionDep,
    user: WebUser,
    current: Annotated[str, Form()],
    password: Annotated[str, Form()],
    confirm: Annotated[str, Form()],
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    check_csrf(request, csrf_token)
    try:
        change_password(session, user=user, current=current, password=password, confirm=confirm)
    except DomainError as exc:
        session.rollback()
        page = {"me": user, "message": "", "error": exc.message}
        return render(request, "account.html", page, status_code=exc.status_code)
    return RedirectResponse("/account?message=Your+password+was+changed.", status_code=303)


@router.get("/invite/{token}", response_class=HTMLResponse)
def invite_page(request: Request, token: str, session: SessionDep) -> Response:
    try:
        invite, who = find_invite(session, token=token, now=utcnow())
    except DomainError as exc:
        return render(request, "invite.html", {"who": None, "error": exc.message}, status_code=404)
    return render(
        request, "invite.html", {"who": who, "expires_at": invite.expires_at, "error": None}
    )


@router.post("/invite/{token}", response_class=HTMLResponse)
def accept_invite_form(
    request: Request,
    token: str,
    session: SessionDep,
    password: Annotated[str, Form()],
    confirm: Annotated[str, Form()],
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    check_csrf(request, csrf_token)
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
    request.session.clear()  # a fresh session, as at every login
    request.session["user_id"] = user.id
    return RedirectResponse("/", status_code=303)
