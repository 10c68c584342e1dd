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
