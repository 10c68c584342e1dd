"""The routes of LTI and single sign-on, when the `sso` extra is installed; otherwise pages
that say how to install it (a web image built without it still starts)."""

from __future__ import annotations

import importlib.util

from fastapi import APIRouter
from fastapi.responses import Response

from app.core.errors import NotFound

MISSING = (
    "University sign-in (LTI 1.3 and single sign-on) is not installed on this server; install "
    "kernelgrader[sso] (and Debian's xmlsec1 for SAML), then restart it."
)


def installed() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("pylti1p3", "authlib", "saml2"))


def sign_in_routers() -> list[APIRouter]:
    if installed():
        from app.lti.routes import router as lti
        from app.sso.routes import router as sso

        return [lti, sso]
    missing = APIRouter(include_in_schema=False)

    @missing.api_route("/lti/{rest:path}", methods=["GET", "POST"])
    @missing.api_route("/sso/{rest:path}", methods=["GET", "POST"])
    @missing.get("/sso")
    @missing.get("/courses/{course}/lti")
    async def not_installed() -> Response:
        raise NotFound(MISSING)

    return [missing]
