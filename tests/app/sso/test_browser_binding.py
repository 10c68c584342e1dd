"""A sign-in's answer is taken only in the browser that started it (issue 31, class 8), and an
id_token without an expiry is refused (class 16), against real providers on loopback:
pysaml2's identity provider, oidc-provider-mock, and a bare provider whose claims the test
picks. The attacker starts a sign-in for their own account and has someone else's browser post
(or open) the answer: that browser is not signed in, and no account is made."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.auth.models import SignInProblem
from app.sso.service import add_provider
from app.users.models import User
from tests.app.conftest import World, unique
from tests.app.lti.conftest import Browser
from tests.app.sso.bare_op import BareProvider
from tests.app.sso.idp import TestIdp, read_form
from tests.app.sso.test_sign_in import _oidc, idp, oidc_provider, saml_provider, world  # noqa: F401


def signed_in(browser: Browser) -> bool:
    return browser.get("/account").status_code == 200


def accounts(session: Session, email: str) -> int:
    session.expire_all()
    return int(session.scalar(select(func.count()).where(User.email == email)) or 0)


def test_a_saml_answer_posted_from_another_browser_signs_nobody_in(
    session: Session,
    world: World,  # noqa: F811
    tool: str,
    idp: TestIdp,  # noqa: F811
    browsers: object,
) -> None:
    attacker: Browser = browsers()  # type: ignore[operator]
    victim: Browser = browsers()  # type: ignore[operator]
    slug = saml_provider(session, idp, attacker)
    email = f"{unique('mallory')}@uni.example"
    idp.user_id, idp.attributes = unique("mallory"), {"mail": [email], "displayName": ["M"]}
    start = attacker.get(f"/sso/{slug}/login")
    assert start.status_code == 302
    cookie = start.headers["set-cookie"].lower()
    assert cookie.startswith("kernelgrader_sso=") and "httponly" in cookie and "path=/sso" in cookie
    action, fields = read_form(attacker.http.get(start.headers["location"]).text)
    # The form the identity provider made for the attacker, posted by the victim's browser.
    posted = victim.http.post(action, data=fields)
    assert posted.status_code == 400, posted.text[:2000]
    assert "started in another browser" in posted.text
    assert not signed_in(victim) and accounts(session, email) == 0
    problem = session.scalar(select(SignInProblem).where(SignInProblem.source == slug))
    assert problem is not None and "started in another browser" in problem.detail
    # A browser without the cookie at all fares no better.
    assert httpx.post(action, data=fields).status_code == 400
    # The answer was sound: in the browser that started it, it signs in.
    done = attacker.http.post(action, data=fields)
    assert done.status_code == 303 and signed_in(attacker)
    assert accounts(session, email) == 1


def test_an_openid_answer_opened_in_another_browser_signs_nobody_in(
    session: Session,
    world: World,  # noqa: F811
    tool: str,
    oidc_provider: str,  # noqa: F811
    browsers: object,
) -> None:
    slug, provider = _oidc(session, tool, oidc_provider)
    attacker: Browser = browsers()  # type: ignore[operator]
    victim: Browser = browsers()  # type: ignore[operator]
    email, sub = f"{unique('mallory')}@uni.example", unique("sub")
    claims = {"email": email, "email_verified": True}
    assert httpx.put(f"{provider}/users/{sub}", json=claims).status_code == 204
    start = attacker.get(f"/sso/{slug}/login")
    chosen = attacker.http.post(start.headers["location"], data={"sub": sub})
    callback = chosen.headers["location"]
    opened = victim.http.get(callback)
    assert opened.status_code == 400 and "could not be accepted" in opened.text
    assert not signed_in(victim) and accounts(session, email) == 0


@pytest.fixture
def bare() -> Iterator[BareProvider]:
    with BareProvider() as running:
        yield running


def _bare_sign_in(
    session: Session, tool: str, bare: BareProvider, browser: Browser
) -> tuple[str, str]:
    """Sign in through the bare provider: the slug, and the answer's status and page."""
    slug = unique("bare")
    add_provider(
        session,
        slug=slug,
        name="Bare University",
        kind="oidc",
        issuer=bare.issuer,
        client_id=bare.client_id,
        client_secret=bare.client_secret,
    )
    session.commit()
    start = browser.get(f"/sso/{slug}/login")
    assert start.status_code == 302 and start.headers["location"].startswith(bare.issuer)
    back = browser.http.get(start.headers["location"])
    answer = browser.http.get(back.headers["location"])
    return slug, f"{answer.status_code} {answer.text}"


def test_an_id_token_without_exp_is_refused(
    session: Session,
    world: World,  # noqa: F811
    tool: str,
    bare: BareProvider,
    browsers: object,
) -> None:
    email = f"{unique('ada')}@uni.example"
    bare.claims = {"sub": unique("sub"), "email": email, "email_verified": True}
    # The provider works: with its expiry the token signs in.
    assert _bare_sign_in(session, tool, bare, browsers())[1].startswith("303")  # type: ignore[operator]
    assert accounts(session, email) == 1
    other = f"{unique('eve')}@uni.example"
    bare.claims = {"sub": unique("sub"), "email": other, "email_verified": True}
    bare.leave_out = {"exp"}
    slug, answer = _bare_sign_in(session, tool, bare, browsers())  # type: ignore[operator]
    assert answer.startswith("400") and "could not be" in answer
    assert accounts(session, other) == 0
    problem = session.scalar(select(SignInProblem).where(SignInProblem.source == slug))
    assert problem is not None and "exp" in problem.detail, problem and problem.detail


def test_an_id_token_whose_iat_is_not_a_number_cannot_be_checked(
    session: Session,
    world: World,  # noqa: F811
    tool: str,
    bare: BareProvider,
    browsers: object,
) -> None:
    email = f"{unique('ada')}@uni.example"
    bare.claims = {"sub": unique("sub"), "email": email, "email_verified": True, "iat": True}
    slug, answer = _bare_sign_in(session, tool, bare, browsers())  # type: ignore[operator]
    sentence = (
        "The answer from Bare University could not be checked, so you were not signed in; try "
        "again, and tell your course staff if it keeps happening."
    )
    assert answer.startswith("400") and sentence in answer, answer
    assert accounts(session, email) == 0
    problem = session.scalar(select(SignInProblem).where(SignInProblem.source == slug))
    assert problem is not None and (problem.kind, problem.sentence) == ("oidc", sentence)
    assert problem.detail.startswith(f"oidc provider {slug}: ") and "iat" in problem.detail


@pytest.mark.anyio
async def test_the_saml_browser_cookie_travels_with_the_providers_post_and_only_from_us(
    session: Session,
    idp: TestIdp,  # noqa: F811
) -> None:
    """Over HTTPS: SameSite=None and Secure, so the identity provider's cross-site post
    brings it, and the __Host- prefix, so no other host can set it (and the answer is read
    by that name); over HTTP: /sso only."""
    from app.main import create_app

    slug = unique("saml")
    add_provider(
        session,
        slug=slug,
        name="U",
        kind="saml",
        idp_metadata=idp.metadata(),
        email_attribute="mail",
        email_domains=["uni.example"],
    )
    session.commit()
    transport = httpx.ASGITransport(app=create_app())
    for base, expected in (
        ("https://testserver", ["__host-kernelgrader_sso=", "secure", "samesite=none", "path=/;"]),
        ("http://testserver", ["kernelgrader_sso=", "path=/sso"]),
    ):
        async with httpx.AsyncClient(transport=transport, base_url=base) as client:
            idp.trust((await client.get(f"/sso/{slug}/saml/metadata")).text)
            email = f"{unique('ada')}@uni.example"
            idp.user_id, idp.attributes = unique("ada"), {"mail": [email]}
            start = await client.get(f"/sso/{slug}/login")
            assert start.status_code == 302
            (cookie,) = [
                c.lower() for c in start.headers.get_list("set-cookie") if "kernelgrader_sso=" in c
            ]
            assert cookie.startswith(expected[0]) and "httponly" in cookie, cookie
            assert all(part in cookie + ";" for part in expected[1:]), cookie
            assert ("secure" in cookie) is base.startswith("https"), cookie
            _, fields = read_form(httpx.get(start.headers["location"]).text)
            async with httpx.AsyncClient(transport=transport, base_url=base) as stranger:
                posted = await stranger.post(f"/sso/{slug}/saml/acs", data=fields)
                assert posted.status_code == 400 and "another browser" in posted.text
            done = await client.post(f"/sso/{slug}/saml/acs", data=fields)
            assert done.status_code == 303, done.text[:2000]
        assert accounts(session, email) == 1
