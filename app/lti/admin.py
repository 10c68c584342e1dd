"""/admin/lti: the site administrators' page of LMS registrations (made, changed, removed,
keys rotated). A course's staff see only which LMSs exist, on their course's LMS page."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any
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
from app.web.forms import PostedForm
from app.web.templating import check_csrf, render

router = APIRouter(include_in_schema=False)

PAGE = "/admin/lti"
_TEMPLATE = "lti/admin.html"


def _back(message: str = "", error: str = "") -> RedirectResponse:
    query = f"?message={quote(message)}" if message else f"?error={quote(error)}"
    return RedirectResponse(PAGE + query, status_code=303)


def _current(platform: LtiPlatform) -> dict[str, str]:
    """A registration's fields as its "Change" form shows them until one is typed."""
    return {
        **{name: str(getattr(platform, name)) for name in FIELDS if name != "deployment_ids"},
        "deployment_ids": ", ".join(platform.deployment_ids),
    }


def _context(session: Session) -> dict[str, Any]:
    """The page: each registration with its "Change" form as it stands, and the new one's."""
    linked = dict(
        session.execute(
            select(LtiContext.platform_id, func.count())
            .where(LtiContext.course_id.is_not(None))
            .group_by(LtiContext.platform_id)
        ).all()
    )
    rows = registrations(session)
    return {
        "registrations": [(p, tool_urls(p.slug), linked.get(p.id, 0)) for p in rows],
        "current": {p.slug: _current(p) for p in rows},
        "urls": tool_urls(),
        "address_problem": public_address_problem(get_settings().public_url),
        "lmss": LMSS,
    }


@router.get(PAGE, response_class=HTMLResponse)
async def page(request: Request, web: WebDb, message: str = "", error: str = "") -> Response:
    def work(session: Session, user: User) -> Response:
        require_site_admin(user)
        context = {**_context(session), "message": message, "error": error}
        return render(request, _TEMPLATE, context)

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
        form = PostedForm({**asdict(values), "slug": slug}, prefix="new-")
        form.refuse_all(registration_problems(session, values=values, slug=wanted))
        made = (
            form.attempt(lambda: create_registration(session, slug=wanted, values=values, by=user))
            if form.ok
            else None
        )
        if made is None:
            return form.refused(request, session, _TEMPLATE, lambda: _context(session))
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
        form = PostedForm(asdict(values), prefix=f"change-{platform.slug}-")
        form.refuse_all(registration_problems(session, values=values, platform=platform))
        changed = (
            form.attempt(lambda: update_registration(session, platform=platform, values=values))
            if form.ok
            else None
        )
        if changed is None:
            return form.refused(request, session, _TEMPLATE, lambda: _context(session))
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
