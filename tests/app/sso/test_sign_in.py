"""University sign-in against real providers on loopback: an OpenID provider (oidc-provider-mock,
a Flask server built on Authlib's server side, signing id_tokens with its own key) and a SAML
identity provider (pysaml2's IdP). Attribute-mapping failures read as a sentence to the person
and in detail on the staff's page; one person keeps one account across sign-in methods."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.models import SignInProblem
from app.core.mail import outbox
from app.sso.service import add_provider
from app.users.models import User, UserIdentity
from app.users.service import find_user
from tests.app.conftest import World, make_world, unique
from tests.app.lti.conftest import Browser, log_in, registered_and_linked
from tests.app.lti.platform import TestPlatform
from tests.app.mail.smtp import Inbox, body_of, mail_server  # noqa: F401
from tests.app.sso.idp import TestIdp, read_form
from tests.app.web.test_people_links import LINK, logged_in, post


@pytest.fixture
def world(session: Session) -> World:
    return make_world(session)


@pytest.fixture(scope="module")
def oidc_provider() -> Iterator[str]:
    from oidc_provider_mock import run_server_in_thread

    mp = pytest.MonkeyPatch()
    # Plain HTTP on loopback: Authlib (both sides) otherwise insists on HTTPS.
    mp.setenv("AUTHLIB_INSECURE_TRANSPORT", "1")
    try:
        with run_server_in_thread(require_client_registration=True, require_nonce=True) as server:
            yield f"http://localhost:{server.server_port}"
    finally:
        mp.undo()


def _oidc(session: Session, tool: str, provider: str, **mapping: object) -> tuple[str, str]:
    slug = unique("uni")
    client = httpx.post(
        f"{provider}/oauth2/clients",
        json={"redirect_uris": [f"{tool}/sso/{slug}/callback"]},
    ).json()
    add_provider(
        session,
        slug=slug,
        name="Example University",
        kind="oidc",
        issuer=provider,
        client_id=client["client_id"],
        client_secret=client["client_secret"],
        email_attribute=str(mapping.get("email_attribute", "email")),
        name_attribute="name",
        email_domains=list(mapping.get("email_domains", [])),  # type: ignore[call-overload]
    )
    session.commit()
    return slug, provider


def _oidc_sign_in(
    browser: Browser, slug: str, provider: str, sub: str, claims: dict[str, object]
) -> httpx.Response:
    assert httpx.put(f"{provider}/users/{sub}", json=claims).status_code == 204
    start = browser.get(f"/sso/{slug}/login?next=/account")
    assert start.status_code == 302, start.text[:2000]
    authorize = start.headers["location"]
    assert authorize.startswith(provider + "/oauth2/authorize")
    chosen = browser.http.post(authorize, data={"sub": sub})  # the provider's sign-in form
    assert chosen.status_code == 302, chosen.text[:2000]
    callback = chosen.headers["location"]
    assert callback.startswith(f"{browser.tool}/sso/{slug}/callback?")
    return browser.http.get(callback)


def test_openid_connect_signs_in_to_the_account_with_that_email(
    session: Session, world: World, tool: str, oidc_provider: str, browser: Browser
) -> None:
    slug, provider = _oidc(session, tool, oidc_provider)
    student = world.student.user
    done = _oidc_sign_in(
        browser,
        slug,
        provider,
        unique("sub"),
        {"email": student.email, "email_verified": True, "name": "A student"},
    )
    assert done.status_code == 303 and done.headers["location"] == "/account"
    assert student.email in browser.page("/account")
    session.expire_all()
    identity = session.scalar(select(UserIdentity).where(UserIdentity.user_id == student.id))
    assert identity is not None and (identity.kind, identity.issuer) == ("oidc", provider)
    assert session.scalars(select(User.id).where(User.email == student.email)).all() == [student.id]


def test_lti_then_university_sign_in_is_one_account(
    session: Session, world: World, tool: str, oidc_provider: str, browsers: object
) -> None:
    """Two sign-in methods, one person: the LMS made the account, the university's sign-in
    finds it by its verified email; the same subject signs in again after an email change."""
    forget = __import__("app.lti.tool", fromlist=["forget_tokens"]).forget_tokens
    forget()
    with TestPlatform(tool_base=tool) as lms:
        email = f"{unique('hedy')}@uni.example"
        hedy = lms.person("Hedy Lamarr", email)
        course = lms.course("GPU", hedy)
        registered_and_linked(session, world, lms, course, tool)
        landed = browsers().launch(
            lms, hedy, link=lms.link(course, "Scale", {"lab": world.lab.slug})
        )  # type: ignore[operator]
        assert landed.response.status_code == 303
    slug, provider = _oidc(session, tool, oidc_provider)
    sub = unique("sub")
    done = _oidc_sign_in(browsers(), slug, provider, sub, {"email": email, "email_verified": True})  # type: ignore[operator]
    assert done.status_code == 303
    session.expire_all()
    accounts = session.scalars(select(User.id).where(User.email == email)).all()
    assert len(accounts) == 1
    kinds = session.scalars(
        select(UserIdentity.kind)
        .where(UserIdentity.user_id == accounts[0])
        .order_by(UserIdentity.kind)
    ).all()
    assert kinds == ["lti", "oidc"]
    again = _oidc_sign_in(
        browsers(), slug, provider, sub, {"email": "hedy.new@uni.example", "email_verified": True}
    )  # type: ignore[operator]
    assert again.status_code == 303
    session.expire_all()
    assert session.scalar(select(User).where(User.email == "hedy.new@uni.example")) is None


@pytest.mark.parametrize(
    ("claims", "mapping", "sentence", "detail"),
    [
        (
            {"name": "No Email"},
            {},
            "did not tell kernelgrader your email address",
            "the email attribute 'email' is missing",
        ),
        (
            {"email": "someone@uni.example", "email_verified": False},
            {},
            "did not vouch for your email address someone@uni.example",
            "email_verified is not true",
        ),
        (
            {"email": "someone@elsewhere.example", "email_verified": True},
            {"email_domains": ["uni.example"]},
            "is not one that Example University signs in for here",
            "email domain 'elsewhere.example' is not among",
        ),
        (
            # A look-alike of a listed domain is another domain.
            {"email": "someone@evil-uni.example", "email_verified": True},
            {"email_domains": ["uni.example"]},
            "is not one that Example University signs in for here",
            "email domain 'evil-uni.example' is not among",
        ),
        (
            {"email": "someone@uni.example.evil", "email_verified": True},
            {"email_domains": ["uni.example"]},
            "is not one that Example University signs in for here",
            "email domain 'uni.example.evil' is not among",
        ),
        (
            {"mail": "someone@uni.example", "email_verified": True},
            {"email_attribute": "upn"},
            "did not tell kernelgrader your email address",
            "the email attribute 'upn' is missing",
        ),
    ],
)
def test_an_attribute_mapping_error_is_a_sentence_and_a_detail_for_staff(
    session: Session,
    world: World,
    tool: str,
    oidc_provider: str,
    browsers: object,
    claims: dict[str, object],
    mapping: dict[str, object],
    sentence: str,
    detail: str,
) -> None:
    slug, provider = _oidc(session, tool, oidc_provider, **mapping)
    users_before = session.scalar(select(User.id).order_by(User.id.desc()).limit(1))
    answer = _oidc_sign_in(browsers(), slug, provider, unique("sub"), claims)  # type: ignore[operator]
    assert answer.status_code == 400
    assert sentence in answer.text
    session.expire_all()
    problem = session.scalar(select(SignInProblem).where(SignInProblem.source == slug))
    assert problem is not None and problem.reference in answer.text
    assert detail in problem.detail and "received:" in problem.detail
    assert session.scalar(select(User.id).order_by(User.id.desc()).limit(1)) == users_before
    # Every course's refusals are on this page: a course's instructor is refused it, a site
    # administrator reads the detail there.
    staff = browsers()  # type: ignore[operator]
    log_in(staff, world.instructor.email)
    assert staff.get("/admin/sign-in").status_code == 403
    world.outsider.user.is_site_admin = True
    session.commit()
    admin = browsers()  # type: ignore[operator]
    log_in(admin, world.outsider.email)
    page = admin.page("/admin/sign-in")
    assert problem.reference in page and detail.split("'")[0] in page


def test_an_email_in_the_providers_domains_is_vouched_for_by_the_domain(
    session: Session, world: World, tool: str, oidc_provider: str, browser: Browser
) -> None:
    """With domains set, an address in one of them needs no email_verified claim: the
    provider signs in for that domain (a look-alike is refused, above)."""
    slug, provider = _oidc(session, tool, oidc_provider, email_domains=["Uni.Example"])
    email = f"{unique('grace')}@uni.example"
    done = _oidc_sign_in(browser, slug, provider, unique("sub"), {"email": email, "name": "G"})
    assert done.status_code == 303 and done.headers["location"] == "/account", done.text[:2000]
    session.expire_all()
    assert session.scalar(select(User.id).where(User.email == email)) is not None


@pytest.fixture
def idp() -> Iterator[TestIdp]:
    if shutil.which("xmlsec1") is None:
        reason = "SAML needs Debian's xmlsec1 (apt-get install xmlsec1), which pysaml2 runs"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    with TestIdp() as running:
        yield running


def saml_provider(session: Session, idp: TestIdp, browser: Browser) -> str:
    """A SAML provider for the test identity provider, which trusts kernelgrader's metadata as
    served; its slug."""
    slug = unique("saml")
    add_provider(
        session,
        slug=slug,
        name="Example University SAML",
        kind="saml",
        idp_metadata=idp.metadata(),
        email_attribute="mail",
        name_attribute="displayName",
        email_domains=["uni.example"],
    )
    session.commit()
    idp.trust(browser.page(f"/sso/{slug}/saml/metadata"))
    return slug


def test_saml_signs_in_through_a_real_identity_provider(
    session: Session, world: World, tool: str, idp: TestIdp, browser: Browser
) -> None:
    slug = saml_provider(session, idp, browser)
    email = f"{unique('emmy')}@uni.example"
    idp.user_id, idp.attributes = unique("emmy"), {"mail": [email], "displayName": ["Emmy Noether"]}
    start = browser.get(f"/sso/{slug}/login?next=/account")
    assert start.status_code == 302 and start.headers["location"].startswith(idp.base)
    answer = browser.http.get(start.headers["location"])
    action, fields = read_form(answer.text)
    assert action == f"{tool}/sso/{slug}/saml/acs" and "SAMLResponse" in fields
    done = browser.http.post(action, data=fields)
    assert done.status_code == 303 and done.headers["location"] == "/account", done.text[:2000]
    assert email in browser.page("/account")
    session.expire_all()
    user = session.scalar(select(User).where(User.email == email))
    assert user is not None and user.name == "Emmy Noether"
    # The same answer posted again (a replay) is refused: its request was answered once.
    replay = httpx.post(action, data=fields)
    assert replay.status_code == 400 and "does not match a sign-in started here" in replay.text
    # A forged answer (the signed assertion altered) is refused by the signature check.
    import base64

    xml = base64.b64decode(fields["SAMLResponse"]).decode()
    start = browser.get(f"/sso/{slug}/login")
    forged_fields = read_form(browser.http.get(start.headers["location"]).text)[1]
    forged_xml = (
        base64.b64decode(forged_fields["SAMLResponse"]).decode().replace(email, "admin@uni.example")
    )
    assert forged_xml != xml
    forged_fields["SAMLResponse"] = base64.b64encode(forged_xml.encode()).decode()
    forged = browser.http.post(action, data=forged_fields)
    assert forged.status_code == 400 and "could not be accepted" in forged.text
    session.expire_all()
    assert session.scalar(select(User).where(User.email == "admin@uni.example")) is None


def _set_password_through(browser: Browser, link: str, password: str) -> None:
    path = link[link.index("/invite/") :]
    answer = browser.http.post(
        browser.tool + path,
        data={"password": password, "confirm": password, "csrf_token": browser.csrf(path)},
    )
    assert answer.status_code == 303, answer.text[:2000]


def _added_with_a_link(
    browsers: object, course: World, email: str, mail: Inbox | None = None
) -> str:
    """The course's instructor adds a new person by email and asks for a link: the link shown
    to them (no mail), or the one mailed to the person."""
    staff = logged_in(browsers, course.instructor)
    added = post(staff, course, "/add", {"email": email, "invite": "true"})
    # A link shown is a page of its own (not kept in history); a mailed one, back to the list.
    assert added.status_code == (200 if mail is None else 303), added.text[:2000]
    if mail is None:
        shown = LINK.search(added.text)
        assert shown, added.text[:2000]
        return shown.group(0)
    outbox.wait_until_sent()
    (sent,) = mail.to(email)
    mailed = LINK.search(body_of(sent))
    assert mailed and not LINK.search(added.text)
    return mailed.group(0)


def test_a_password_set_through_a_link_shown_to_staff_is_not_joined_by_a_sign_in_with_its_email(
    session: Session, tool: str, oidc_provider: str, browsers: object
) -> None:
    # Issue 31, class 1: another course's instructor makes an account for an address, uses the
    # link they were shown, and waits for its owner to sign in through the university.
    slug, provider = _oidc(session, tool, oidc_provider)
    attackers = make_world(session)
    email = f"{unique('newcomer')}@uni.edu"
    link = _added_with_a_link(browsers, attackers, email)
    _set_password_through(browsers(), link, "the-attackers-password")  # type: ignore[operator]
    held = find_user(session, email=email)
    assert held is not None and held.password_via_shown_link
    owner: Browser = browsers()  # type: ignore[operator]
    sub = unique("sub")
    done = _oidc_sign_in(owner, slug, provider, sub, {"email": email, "email_verified": True})
    assert done.status_code == 303, done.text[:2000]
    session.expire_all()
    identity = session.scalar(select(UserIdentity).where(UserIdentity.subject == sub))
    assert identity is not None and identity.user_id != held.id
    assert session.scalars(select(UserIdentity).where(UserIdentity.user_id == held.id)).all() == []


def test_a_password_set_through_a_mailed_link_is_joined_by_a_sign_in_with_its_email(
    session: Session,
    tool: str,
    oidc_provider: str,
    browsers: object,
    mail_server: Inbox,  # noqa: F811
) -> None:
    slug, provider = _oidc(session, tool, oidc_provider)
    course = make_world(session)
    email = f"{unique('newcomer')}@uni.edu"
    link = _added_with_a_link(browsers, course, email, mail=mail_server)
    _set_password_through(browsers(), link, "the-owners-password")  # type: ignore[operator]
    owned = find_user(session, email=email)
    assert owned is not None and not owned.password_via_shown_link
    sub = unique("sub")
    signed_in: Browser = browsers()  # type: ignore[operator]
    done = _oidc_sign_in(signed_in, slug, provider, sub, {"email": email, "email_verified": True})
    assert done.status_code == 303, done.text[:2000]
    session.expire_all()
    identity = session.scalar(select(UserIdentity).where(UserIdentity.subject == sub))
    assert identity is not None and identity.user_id == owned.id
