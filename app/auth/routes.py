"""What signing in from outside shares: the page of a refused sign-in, and whether the `sso`
extra (LTI and single sign-on) is installed here (app.main mounts their routes, or pages that
say how to install it)."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from fastapi import Request
from fastapi.responses import Response

from app.auth.problems import SignInRefused, record
from app.web.deps import PublicDb
from app.web.templating import render

if TYPE_CHECKING:
    pass

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
