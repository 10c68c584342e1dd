"""What a university sign-in takes from the provider's answer, against the OpenID provider on
loopback: the email in lower case, a name from the given and family names where no full name
comes, email_verified as a boolean or the string some providers send, a listed domain in any
case; and a provider that is not there, or named or listed wrongly, is a sentence."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.errors import Conflict, Invalid
from app.sso.models import SsoProvider
from app.sso.service import add_provider, remove_provider
from app.users.models import User
from tests.app.conftest import unique
from tests.app.lti.conftest import Browser
from tests.app.sso.test_sign_in import _oidc, _oidc_sign_in, oidc_provider, world

__all__ = ["oidc_provider", "world"]  # fixtures, used by name


def _account(session: Session, email: str) -> User | None:
    session.expire_all()
    return session.scalar(select(User).where(User.email == email))


def test_the_email_is_taken_in_lower_case_and_the_name_from_its_parts(
    session: Session, tool: str, oidc_provider: str, browser: Browser
) -> None:
    slug, provider = _oidc(session, tool, oidc_provider, email_domains=["uni.example"])
    local = unique("grace")
    claims = {
        "email": f"{local.upper()}@UNI.EXAMPLE",
        "given_name": "Grace",
        "family_name": "Hopper",
    }
    done = _oidc_sign_in(browser, slug, provider, unique("sub"), claims)
    assert done.status_code == 303, done.text[:2000]
    user = _account(session, f"{local}@uni.example")
    assert user is not None and user.name == "Grace Hopper"


@pytest.mark.parametrize(("verified", "taken"), [("true", True), ("TRUE", True), ("false", False)])
def test_email_verified_may_come_as_a_string(
    session: Session,
    tool: str,
    oidc_provider: str,
    browser: Browser,
    verified: str,
    taken: bool,
) -> None:
    slug, provider = _oidc(session, tool, oidc_provider)
    email = f"{unique('ada')}@elsewhere.example"
    claims = {"email": email, "email_verified": verified, "name": "Ada"}
    done = _oidc_sign_in(browser, slug, provider, unique("sub"), claims)
    assert done.status_code == (303 if taken else 400), done.text[:2000]
    assert (_account(session, email) is not None) is taken


def test_a_provider_that_is_not_there_is_a_sentence(tool: str, browser: Browser) -> None:
    answer = browser.get("/sso/no-such-university/login")
    assert answer.status_code == 404
    assert (
        "There is no university sign-in named no-such-university; pick yours on the sign-in "
        "page." in answer.text
    )


def test_a_providers_name_and_domains_are_checked_and_tidied(session: Session) -> None:
    for slug in ("Upper", "-dash", "with space", "x" * 65, ""):
        with pytest.raises(Invalid) as refused:
            add_provider(session, slug=slug, name="U", kind="oidc")
        assert refused.value.message == (
            f"'{slug}' is not a provider name; use lower-case letters, digits, '-'."
        )
    slug = unique("uni")
    row = add_provider(
        session,
        slug=slug,
        name="  ",
        kind="oidc",
        issuer="https://login.uni.example",
        client_id=None,
        email_domains=[" @Uni.Example ", "", "  "],
    )
    session.commit()
    assert (row.name, row.email_domains, row.client_id) == (slug, ["uni.example"], "")
    with pytest.raises(Conflict) as twice:
        add_provider(session, slug=slug, name="Again", kind="oidc")
    assert twice.value.message == (
        f"A sign-in provider named {slug} exists already; remove it first."
    )
    session.rollback()
    assert remove_provider(session, slug=slug) is True
    session.commit()
    assert session.scalar(select(SsoProvider).where(SsoProvider.slug == slug)) is None
    assert remove_provider(session, slug=slug) is False
