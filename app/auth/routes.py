"""The routes of LTI and single sign-on, when the `sso` extra is installed; otherwise pages
that say how to install it (a web image built without it still starts)."""

from __future__ import annotations

import importlib.util

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.auth.problems import SignInRefused, record
from app.core.errors import NotFound
from app.web.deps import PublicDb
from app.web.templating import render

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


def sign_in_routers() -> list[APIRouter]:
    if installed():
        from app.lti.admin import router as lti_admin
        from app.lti.routes import router as lti
        from app.sso.routes import router as sso

        return [lti, lti_admin, sso]
    missing = APIRouter(include_in_schema=False)

    @missing.api_route("/lti/{rest:path}", methods=["GET", "POST"])
    @missing.api_route("/sso/{rest:path}", methods=["GET", "POST"])
    @missing.get("/sso")
    @missing.get("/courses/{course}/lti")
    @missing.get("/admin/lti")
    async def not_installed() -> Response:
        raise NotFound(MISSING)

    return [missing]
