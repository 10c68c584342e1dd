"""`kernelgrader sso` and `kernelgrader lti`, through Typer's CliRunner."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from app.core.database import session_scope
from app.sso.models import SsoProvider
from tests.app.conftest import unique
from tests.app.test_cli import fails, run


def test_sso_providers_are_added_changed_listed_and_removed(tmp_path: Path) -> None:
    slug = unique("uni")
    out = run(
        "sso",
        "add-oidc",
        slug,
        "--issuer",
        "https://login.uni.example",
        "--client-id",
        "kg",
        "--client-secret",
        "s3cret",
        "--name",
        "Example University",
        "--email-domain",
        "uni.example",
    )
    assert f"/sso/{slug}/callback" in out
    assert "exists already" in fails(
        "sso", "add-oidc", slug, "--issuer", "https://x", "--client-id", "a", "--client-secret", "b"
    )
    run("sso", "set", slug, "--email-attribute", "upn")
    with session_scope() as session:
        row = session.scalar(select(SsoProvider).where(SsoProvider.slug == slug))
        assert row is not None
        assert (row.email_attribute, row.email_domains) == ("upn", ["uni.example"])
    saml = unique("saml")
    assert "--metadata-file or --metadata-url" in fails("sso", "add-saml", saml)
    metadata = tmp_path / "idp.xml"
    metadata.write_text("<EntityDescriptor/>", encoding="utf-8")
    out = run("sso", "add-saml", saml, "--metadata-file", str(metadata))
    assert f"/sso/{saml}/saml/acs" in out
    listed = run("sso", "list")
    assert f"{slug} (oidc): Example University; email from 'upn'" in listed
    assert f"{saml} (saml)" in listed
    run("sso", "remove", saml)
    assert f"There is no provider {saml}" in fails("sso", "remove", saml)


def test_lti_sync_reports_what_it_did() -> None:
    out = run("lti", "sync")
    assert "Scores:" in out and "sent" in out


def test_site_administrators_are_granted_listed_and_revoked_but_never_the_last() -> None:
    from sqlalchemy import update

    from app.courses.models import Role
    from app.users.models import User
    from tests.app.conftest import make_member

    with session_scope() as session:
        # Alone with these two (other tests' administrators step down for this one).
        session.execute(update(User).values(is_site_admin=False))
        first = make_member(session, None, Role.student).user.email
        second = make_member(session, None, Role.instructor).user.email
    assert "No site administrator yet" in run("admin", "list")
    assert f"{first} is a site administrator." in run("admin", "grant", first)
    run("admin", "grant", second)
    assert run("admin", "list").split() == sorted([first, second])
    run("admin", "revoke", first)
    assert f"{second} is the last site administrator" in fails("admin", "revoke", second)
    assert run("admin", "list").split() == [second]
    assert "There is no account nobody@x.example" in fails("admin", "grant", "nobody@x.example")


def test_lms_registrations_are_added_changed_listed_rotated_and_removed() -> None:
    from app.lti.models import LtiPlatform, LtiToolKey

    slug = unique("canvas")
    issuer = f"https://{slug}.instructure.example"
    args = [
        "--issuer", issuer, "--client-id", "1000042", "--deployment", "7:abc",
        "--login-url", f"{issuer}/api/lti/authorize_redirect",
        "--token-url", f"{issuer}/login/oauth2/token",
        "--key-set-url", f"{issuer}/api/lti/security/jwks",
    ]  # fmt: skip
    out = run("lti", "add", slug, *args, "--name", "Canvas")
    assert f"/lti/jwks/{slug}" in out and "/lti/login" in out
    assert f"owns the issuer {issuer}" in fails("lti", "add", unique("again"), *args)
    run("lti", "set", slug, "--deployment", "7:abc", "--deployment", "9:def")
    listed = run("lti", "list")
    assert f"{slug}: Canvas; issuer {issuer}, client id 1000042" in listed
    assert "deployments: 7:abc, 9:def" in listed
    with session_scope() as session:
        platform = session.scalar(select(LtiPlatform).where(LtiPlatform.slug == slug))
        assert platform is not None and not platform.shared_key
        before = session.scalars(
            select(LtiToolKey.kid).where(
                LtiToolKey.platform_id == platform.id, LtiToolKey.retired_at.is_(None)
            )
        ).all()
    assert f"/lti/jwks/{slug}" in run("lti", "rotate-key", slug)
    with session_scope() as session:
        now = session.scalars(
            select(LtiToolKey.kid).where(
                LtiToolKey.platform_id == platform.id, LtiToolKey.retired_at.is_(None)
            )
        ).all()
    assert len(before) == len(now) == 1 and before != now
    assert "Removed" in run("lti", "remove", slug)
    assert f"There is no LMS registration named {slug}" in fails("lti", "remove", slug)
