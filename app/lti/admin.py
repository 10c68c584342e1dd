"""/admin/lti: the site administrators' page of LMS registrations (made, changed, removed,
keys rotated). A course's staff see only which LMSs exist, on their course's LMS page."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.errors import DomainError
from app.lti.keys import make_key
from app.lti.lms import LMSS
from app.lti.models import LtiContext, LtiPlatform
from app.lti.registrations import (
    RegistrationValues,
    create_registration,
    get_registration,
    registrations,
    remove_registration,
    tool_urls,
    update_registration,
)
from app.users.models import User
from app.users.site_admins import require_site_admin
from app.web.deps import WebDb
from app.web.templating import check_csrf, render

router = APIRouter(include_in_schema=False)

PAGE = "/admin/lti"


def _back(message: str = "", error: str = "") -> RedirectResponse:
    query = f"?message={quote(message)}" if message else f"?error={quote(error)}"
    return RedirectResponse(PAGE + query, status_code=303)


@router.get(PAGE, response_class=HTMLResponse)
async def page(request: Request, web: WebDb, message: str = "", error: str = "") -> Response:
    def work(session: Session, user: User) -> Response:
        require_site_admin(user)
        linked = dict(
            session.execute(
                select(LtiContext.platform_id, func.count())
                .where(LtiContext.course_id.is_not(None))
                .group_by(LtiContext.platform_id)
            ).all()
        )
        return render(
            request,
            "lti/admin.html",
            {
                "registrations": [
                    (p, tool_urls(p.slug), linked.get(p.id, 0)) for p in registrations(session)
                ],
                "urls": tool_urls(),
                "lmss": LMSS,
                "message": message,
                "error": error,
            },
        )

    return await web.run(work)


Text = Annotated[str, Form()]


async def _values(
    issuer: Text,
    client_id: Text,
    deployment_ids: Text,
    auth_login_url: Text,
    auth_token_url: Text,
    key_set_url: Text,
    name: Text = "",
    auth_audience: Text = "",
) -> RegistrationValues:
    return RegistrationValues(
        name=name,
        issuer=issuer,
        client_id=client_id,
        deployment_ids=deployment_ids,
        auth_login_url=auth_login_url,
        auth_token_url=auth_token_url,
        key_set_url=key_set_url,
        auth_audience=auth_audience,
    )


Values = Annotated[RegistrationValues, Depends(_values)]


@router.post(PAGE)
async def create(
    request: Request, web: WebDb, slug: Text, values: Values, csrf_token: Text = ""
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        require_site_admin(user)
        try:
            made = create_registration(session, slug=slug, values=values, by=user)
        except DomainError as exc:
            session.rollback()
            return _back(error=exc.message)
        return _back(
            message=f"Registered {made.name}; give its LMS the key set URL "
            f"{tool_urls(made.slug)['jwks']}. LMS courses open a course once an instructor "
            "links them."
        )

    return await web.run(work)


@router.post(PAGE + "/{slug}")
async def change(
    request: Request, slug: str, web: WebDb, values: Values, csrf_token: Text = ""
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        require_site_admin(user)
        try:
            platform = get_registration(session, slug=slug)
            update_registration(session, platform=platform, values=values)
        except DomainError as exc:
            session.rollback()
            return _back(error=exc.message)
        return _back(message=f"Changed {slug}.")

    return await web.run(work)


@router.post(PAGE + "/{slug}/rotate-key")
async def rotate(request: Request, slug: str, web: WebDb, csrf_token: Text = "") -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        require_site_admin(user)
        platform = get_registration(session, slug=slug)
        make_key(session, platform=platform)
        return _back(
            message=f"{slug} signs with a new key of its own, served at "
            f"{tool_urls(slug)['jwks']}; give its LMS that key set URL if it has another."
        )

    return await web.run(work)


@router.post(PAGE + "/{slug}/remove")
async def remove(request: Request, slug: str, web: WebDb, csrf_token: Text = "") -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        require_site_admin(user)
        platform: LtiPlatform = get_registration(session, slug=slug)
        gone = remove_registration(session, platform=platform)
        return _back(
            message=f"Removed {slug}, with its {gone.contexts} LMS courses' links and "
            f"{gone.identities} LMS sign-ins; accounts and submissions stay."
        )

    return await web.run(work)
