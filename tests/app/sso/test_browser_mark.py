"""The mark that ties a SAML sign-in to its browser (written against the survivors of
scripts/mutation.py, app/sso): one mark per browser, kept across its sign-ins, so two tabs
signing in at once both finish; a mark the browser brings is kept only at 32 to 64 characters;
and the cookie lives as long as a sign-in may take, over HTTPS as a __Host- cookie sent with
the identity provider's cross-site post (Secure, SameSite=None, path /)."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy.orm import Session

from app.main import create_app
from app.sso.pages import BROWSER_COOKIE, SAML_STATE_SECONDS
from tests.app.conftest import unique
from tests.app.lti.conftest import Browser
from tests.app.sso.idp import TestIdp
from tests.app.sso.test_saml_checks import _answer
from tests.app.sso.test_sign_in import idp, saml_provider  # noqa: F401

pytestmark = pytest.mark.anyio


def test_two_sign_ins_of_one_browser_both_finish(
    session: Session,
    tool: str,
    idp: TestIdp,  # noqa: F811
    browser: Browser,
) -> None:
    slug = saml_provider(session, idp, browser)
    email = f"{unique('tabs')}@uni.example"
    idp.user_id, idp.attributes = unique("t"), {"mail": [email]}
    action, first = _answer(browser, slug)
    _, second = _answer(browser, slug)
    for fields in (first, second):
        done = browser.http.post(action, data=fields)
        assert done.status_code == 303, done.text[:2000]


async def test_the_mark_a_browser_brings_is_kept_at_32_to_64_characters(
    session: Session,
    tool: str,
    idp: TestIdp,  # noqa: F811
    browser: Browser,
) -> None:
    slug = saml_provider(session, idp, browser)
    transport = httpx.ASGITransport(app=create_app())
    for scheme, name in (("http", BROWSER_COOKIE), ("https", f"__Host-{BROWSER_COOKIE}")):
        async with httpx.AsyncClient(transport=transport, base_url=f"{scheme}://kg") as client:
            for length, kept in ((31, False), (32, True), (64, True), (65, False)):
                mark = "m" * length
                client.cookies.clear()
                r = await client.get(f"/sso/{slug}/login", headers={"cookie": f"{name}={mark}"})
                assert r.status_code == 302, r.text[:2000]
                (header,) = [
                    h for h in r.headers.get_list("set-cookie") if h.startswith(f"{name}=")
                ]
                given = header.split(";")[0].split("=", 1)[1]
                assert (given == mark) is kept, (length, header)
                assert 32 <= len(given) <= 64
                attributes = {a.strip().lower() for a in header.split(";")[1:]}
                assert f"max-age={SAML_STATE_SECONDS}" in attributes
                assert "httponly" in attributes
                if scheme == "https":
                    assert {"secure", "samesite=none", "path=/"} <= attributes, header
                else:
                    assert "path=/sso" in attributes, header
                    assert not any(a == "secure" or a.startswith("samesite") for a in attributes)
