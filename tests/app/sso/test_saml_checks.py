"""What a SAML answer must be to sign anyone in (written against the survivors of
scripts/mutation.py, app/sso): its assertion signed by the identity provider, and the answer to
the very request this sign-in sent (not another sign-in's, even one of the same browser); and a
server without xmlsec1 says so in a sentence instead of signing in unchecked."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.models import SignInProblem
from app.users.models import User
from tests.app.conftest import unique
from tests.app.lti.conftest import Browser
from tests.app.sso.idp import TestIdp, read_form
from tests.app.sso.test_sign_in import idp, saml_provider  # noqa: F401

REFUSED = "could not be accepted, so you were not signed in"


def _nobody(session: Session, email: str) -> bool:
    session.expire_all()
    return session.scalar(select(User.id).where(User.email == email)) is None


def _answer(browser: Browser, slug: str) -> tuple[str, dict[str, str]]:
    """A sign-in started in this browser, and the identity provider's answer to it."""
    start = browser.get(f"/sso/{slug}/login?next=/account")
    assert start.status_code == 302, start.text[:2000]
    return read_form(browser.http.get(start.headers["location"]).text)


def test_an_unsigned_assertion_signs_nobody_in(
    session: Session,
    tool: str,
    idp: TestIdp,  # noqa: F811
    browser: Browser,
) -> None:
    slug = saml_provider(session, idp, browser)
    email = f"{unique('unsigned')}@uni.example"
    idp.user_id, idp.attributes = unique("u"), {"mail": [email], "displayName": ["Un Signed"]}
    idp.sign_assertion = False
    action, fields = _answer(browser, slug)
    done = browser.http.post(action, data=fields)
    assert done.status_code == 400 and REFUSED in done.text, done.text[:2000]
    assert _nobody(session, email)
    # The same, signed, is taken.
    idp.sign_assertion = True
    action, fields = _answer(browser, slug)
    done = browser.http.post(action, data=fields)
    assert done.status_code == 303, done.text[:2000]
    assert not _nobody(session, email)


def test_an_answer_to_another_sign_in_is_refused(
    session: Session,
    tool: str,
    idp: TestIdp,  # noqa: F811
    browser: Browser,
) -> None:
    slug = saml_provider(session, idp, browser)
    email = f"{unique('crossed')}@uni.example"
    idp.user_id, idp.attributes = unique("c"), {"mail": [email], "displayName": ["Crossed"]}
    # Two sign-ins of one browser: the first's answer, sent as the second's, answers a
    # request the second did not make.
    action, first = _answer(browser, slug)
    _, second = _answer(browser, slug)
    assert first["RelayState"] != second["RelayState"]
    crossed = {**first, "RelayState": second["RelayState"]}
    done = browser.http.post(action, data=crossed)
    assert done.status_code == 400 and REFUSED in done.text, done.text[:2000]
    assert _nobody(session, email)


def test_without_xmlsec1_saml_says_it_is_not_set_up(
    session: Session,
    tool: str,
    idp: TestIdp,  # noqa: F811
    browser: Browser,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slug = saml_provider(session, idp, browser)
    # The server runs in this process: with no PATH, xmlsec1 is not found.
    monkeypatch.setenv("PATH", "")
    refused = browser.get(f"/sso/{slug}/login")
    monkeypatch.undo()
    assert refused.status_code == 400, refused.text[:2000]
    sentence = (
        "University sign-in through SAML is not set up on this server; log in with your "
        "password, and tell your course staff."
    )
    assert sentence in refused.text
    session.expire_all()
    problem = session.scalars(
        select(SignInProblem).where(SignInProblem.sentence == sentence)
    ).all()[-1]
    assert (problem.kind, problem.detail) == (
        "saml",
        "xmlsec1 is not installed (Debian: apt-get install xmlsec1); pysaml2 needs it to check "
        "signatures",
    )
