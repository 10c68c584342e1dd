"""What a SAML answer must be to sign anyone in (written against the survivors of
scripts/mutation.py, app/sso): its assertion signed by the identity provider, the answer to the
very request this sign-in sent (not another sign-in's, even one of the same browser), and naming
someone; the identity keeps its identity provider, so two that number people alike are two
people; a refusal keeps pysaml2's reason for the staff; and a server without xmlsec1 says so in
a sentence instead of signing in unchecked. Also OpenID's refusals: a provider that cannot be
reached, and a callback that answers another sign-in."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.models import SignInProblem
from app.sso.service import add_provider
from app.users.models import User
from tests.app.conftest import unique
from tests.app.lti.conftest import Browser
from tests.app.lti.platform import free_port
from tests.app.sso.idp import TestIdp, read_form
from tests.app.sso.test_sign_in import _oidc, idp, oidc_provider, saml_provider  # noqa: F401

REFUSED = (
    "The answer from Example University SAML could not be accepted, so you were not signed in; "
    "try again, and tell your course staff if it keeps happening."
)


def _problem(session: Session, slug: str) -> SignInProblem:
    """The latest refusal kept for the provider."""
    session.expire_all()
    return session.scalars(
        select(SignInProblem).where(SignInProblem.source == slug).order_by(SignInProblem.id)
    ).all()[-1]


def _refused_in_detail(session: Session, slug: str) -> None:
    problem = _problem(session, slug)
    assert (problem.kind, problem.sentence) == ("saml", REFUSED)
    # The detail names pysaml2's exception (its class, not NoneType) and what it said.
    found = re.fullmatch(rf"saml provider {slug}: (\w+): .+", problem.detail, re.DOTALL)
    assert found and found.group(1) != "NoneType", problem.detail


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
    _refused_in_detail(session, slug)
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
    _refused_in_detail(session, slug)


def test_an_answer_that_names_nobody_signs_nobody_in(
    session: Session,
    tool: str,
    idp: TestIdp,  # noqa: F811
    browser: Browser,
) -> None:
    slug = saml_provider(session, idp, browser)
    email = f"{unique('nameless')}@uni.example"
    idp.user_id, idp.attributes = "", {"mail": [email], "displayName": ["No One"]}
    action, fields = _answer(browser, slug)
    done = browser.http.post(action, data=fields)
    assert done.status_code == 400, done.text[:2000]
    assert "did not say who you are" in done.text
    assert _nobody(session, email)


def test_two_identity_providers_naming_the_same_subject_are_two_people(
    session: Session,
    tool: str,
    idp: TestIdp,  # noqa: F811
    browser: Browser,
    browsers: object,
) -> None:
    subject = unique("same")
    emails = [f"{unique('first')}@uni.example", f"{unique('second')}@uni.example"]
    with TestIdp() as other:
        for provider, email in zip((idp, other), emails, strict=True):
            fresh: Browser = browsers()  # type: ignore[operator]
            slug = saml_provider(session, provider, fresh)
            provider.user_id, provider.attributes = subject, {"mail": [email]}
            action, fields = _answer(fresh, slug)
            done = fresh.http.post(action, data=fields)
            assert done.status_code == 303, done.text[:2000]
            assert email in fresh.page("/account")
    session.expire_all()
    assert all(not _nobody(session, email) for email in emails)


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


def test_an_attribute_of_the_institutions_own_name_is_read(
    session: Session,
    tool: str,
    idp: TestIdp,  # noqa: F811
    browser: Browser,
) -> None:
    # Not in pysaml2's attribute maps: kept as named, since a provider maps its own.
    slug = unique("saml")
    add_provider(
        session,
        slug=slug,
        name="Campus SAML",
        kind="saml",
        idp_metadata=idp.metadata(),
        email_attribute="campusMail",
        name_attribute="campusName",
        email_domains=["uni.example"],
    )
    session.commit()
    idp.trust(browser.page(f"/sso/{slug}/saml/metadata"))
    email = f"{unique('campus')}@uni.example"
    idp.user_id = unique("campus")
    idp.attributes = {"campusMail": [email], "campusName": ["Campus Person"]}
    action, fields = _answer(browser, slug)
    done = browser.http.post(action, data=fields)
    assert done.status_code == 303, done.text[:2000]
    session.expire_all()
    user = session.scalar(select(User).where(User.email == email))
    assert user is not None and user.name == "Campus Person"


def test_a_provider_set_up_with_its_metadata_url_signs_in(
    session: Session,
    tool: str,
    idp: TestIdp,  # noqa: F811
    browser: Browser,
) -> None:
    slug = unique("saml")
    add_provider(
        session,
        slug=slug,
        name="Metadata URL SAML",
        kind="saml",
        idp_metadata_url=f"{idp.base}/idp.xml",
        email_attribute="mail",
        email_domains=["uni.example"],
    )
    session.commit()
    idp.trust(browser.page(f"/sso/{slug}/saml/metadata"))
    email = f"{unique('remote')}@uni.example"
    idp.user_id, idp.attributes = unique("remote"), {"mail": [email]}
    action, fields = _answer(browser, slug)
    done = browser.http.post(action, data=fields)
    assert done.status_code == 303, done.text[:2000]
    assert not _nobody(session, email)


def test_an_openid_provider_that_cannot_be_reached_is_said_so(
    session: Session,
    tool: str,
    browser: Browser,
) -> None:
    slug, issuer = unique("oidc"), f"http://127.0.0.1:{free_port()}"
    add_provider(
        session,
        slug=slug,
        name="Down University",
        kind="oidc",
        issuer=issuer,
        client_id="kg",
        client_secret="s",
        email_domains=["uni.example"],
    )
    session.commit()
    refused = browser.get(f"/sso/{slug}/login")
    assert refused.status_code == 400, refused.text[:2000]
    sentence = (
        "Down University could not be reached, so you could not be signed in; try again in a "
        "minute, or log in with your password."
    )
    assert sentence in refused.text
    problem = _problem(session, slug)
    assert (problem.kind, problem.sentence) == ("oidc", sentence)
    assert problem.detail.startswith(f"oidc provider {slug}: discovery at {issuer} failed: ")


def test_an_openid_answer_to_another_sign_in_is_refused_and_kept(
    session: Session,
    tool: str,
    oidc_provider: str,  # noqa: F811
    browser: Browser,
) -> None:
    slug, _ = _oidc(session, tool, oidc_provider)
    start = browser.get(f"/sso/{slug}/login")
    assert start.status_code == 302, start.text[:2000]
    # A callback whose state is not the one this sign-in sent.
    refused = browser.get(f"/sso/{slug}/callback?code=forged&state=not-this-one")
    assert refused.status_code == 400, refused.text[:2000]
    sentence = (
        "The answer from Example University could not be accepted (it may have been opened "
        "twice or taken too long), so you were not signed in; try again."
    )
    assert sentence in refused.text
    problem = _problem(session, slug)
    assert (problem.kind, problem.sentence) == ("oidc", sentence)
    assert problem.detail.startswith(f"oidc provider {slug}: mismatching_state: ")
