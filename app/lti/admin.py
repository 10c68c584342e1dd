"""/admin/lti: the site administrators' page of LMS registrations (made, changed, removed,
keys rotated). A course's staff see only which LMSs exist, on their course's LMS page."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.public_address import public_address_problem
from app.core.settings import get_settings
from app.lti.keys import make_key
from app.lti.lms import LMSS
from app.lti.models import LtiContext, LtiPlatform
from app.lti.registrations import (
    FIELDS,
    RegistrationValues,
    create_registration,
    get_registration,
    registration_problems,
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


def _typed(platform: LtiPlatform) -> dict[str, str]:
    """A registration's fields as its "Change" form shows them."""
    return {
        **{name: str(getattr(platform, name)) for name in FIELDS if name != "deployment_ids"},
        "deployment_ids": ", ".join(platform.deployment_ids),
    }


def _page(
    request: Request,
    session: Session,
    *,
    message: str = "",
    error: str = "",
    typed: dict[str, str] | None = None,
    errors: dict[str, str] | None = None,
    changing: str = "",
) -> Response:
    """The page; a form that failed is shown again with what was typed and every problem
    (`changing`: the registration whose "Change" form it was, "" for "Register an LMS")."""
    linked = dict(
        session.execute(
            select(LtiContext.platform_id, func.count())
            .where(LtiContext.course_id.is_not(None))
            .group_by(LtiContext.platform_id)
        ).all()
    )
    rows = registrations(session)
    Shown = tuple[dict[str, str], dict[str, str]]  # what a form shows, and its problems
    forms: dict[str, Shown] = {p.slug: (_typed(p), {}) for p in rows}
    new: Shown = ({}, {})
    if errors:
        if changing:
            forms[changing] = (typed or {}, errors)
        else:
            new = (typed or {}, errors)
    return render(
        request,
        "lti/admin.html",
        {
            "registrations": [(p, tool_urls(p.slug), linked.get(p.id, 0)) for p in rows],
            "forms": forms,
            "new": new,
            "changing": changing,
            "urls": tool_urls(),
            "address_problem": public_address_problem(get_settings().public_url),
            "lmss": LMSS,
            "message": message,
            "error": error,
        },
        status_code=422 if errors else 200,
    )


@router.get(PAGE, response_class=HTMLResponse)
async def page(request: Request, web: WebDb, message: str = "", error: str = "") -> Response:
    def work(session: Session, user: User) -> Response:
        require_site_admin(user)
        return _page(request, session, message=message, error=error)

    return await web.run(work)


Text = Annotated[str, Form(max_length=2000)]


async def _values(
    issuer: Text = "",
    client_id: Text = "",
    deployment_ids: Text = "",
    auth_login_url: Text = "",
    auth_token_url: Text = "",
    key_set_url: Text = "",
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
    request: Request, web: WebDb, values: Values, slug: Text = "", csrf_token: Text = ""
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        require_site_admin(user)
        wanted = slug.strip().lower()
        problems = registration_problems(session, values=values, slug=wanted)
        if problems:
            typed = {**asdict(values), "slug": slug}
            return _page(request, session, typed=typed, errors=problems)
        made = create_registration(session, slug=wanted, values=values, by=user)
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
        platform = get_registration(session, slug=slug)
        problems = registration_problems(session, values=values, platform=platform)
        if problems:
            return _page(
                request, session, typed=asdict(values), errors=problems, changing=platform.slug
            )
        update_registration(session, platform=platform, values=values)
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
