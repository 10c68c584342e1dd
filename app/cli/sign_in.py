"""`kernelgrader sso` (university sign-in providers) and `kernelgrader lti` (LMS sync)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.cli.common import fail
from app.core.errors import DomainError

sso_cli = typer.Typer(
    help="University single sign-on (OpenID Connect, SAML 2.0).", no_args_is_help=True
)
lti_cli = typer.Typer(help="LMSs connected through LTI 1.3.", no_args_is_help=True)

EmailAttribute = Annotated[str | None, typer.Option(help="the claim or attribute with the email")]
NameAttribute = Annotated[str | None, typer.Option(help="the claim or attribute with the name")]
Domains = Annotated[
    list[str] | None,
    typer.Option("--email-domain", help="an email domain the provider vouches for (repeat)"),
]


def _show(slug: str) -> None:
    from app.sso.service import urls

    where = urls(slug)
    typer.echo(f"  sign-in link:  {where['login']}")
    typer.echo(f"  OIDC redirect URI:  {where['redirect_uri']}")
    typer.echo(f"  SAML entity id / metadata:  {where['saml_metadata']}")
    typer.echo(f"  SAML ACS (HTTP-POST):  {where['saml_acs']}")


@sso_cli.command("add-oidc")
def add_oidc(
    slug: str,
    issuer: Annotated[str, typer.Option(help="the provider's issuer URL (discovery is read)")],
    client_id: Annotated[str, typer.Option(help="the client id it gave kernelgrader")],
    client_secret: Annotated[str, typer.Option(help="the client secret")],
    name: Annotated[str, typer.Option(help="the button's words: Sign in with NAME")] = "",
    email_attribute: EmailAttribute = None,
    name_attribute: NameAttribute = None,
    email_domain: Domains = None,
) -> None:
    """Add an OpenID Connect provider (an institution's)."""
    from app.core.database import session_scope
    from app.sso.service import add_provider

    try:
        with session_scope() as session:
            add_provider(
                session,
                slug=slug,
                name=name,
                kind="oidc",
                issuer=issuer.strip(),
                client_id=client_id.strip(),
                client_secret=client_secret,
                email_attribute=email_attribute or "email",
                name_attribute=name_attribute or "name",
                email_domains=email_domain or [],
            )
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(f"Added {slug}; give the provider:")
    _show(slug)


@sso_cli.command("add-saml")
def add_saml(
    slug: str,
    metadata_file: Annotated[Path | None, typer.Option(help="the IdP's metadata XML")] = None,
    metadata_url: Annotated[str | None, typer.Option(help="where the IdP's metadata is")] = None,
    name: Annotated[str, typer.Option(help="the button's words: Sign in with NAME")] = "",
    email_attribute: EmailAttribute = None,
    name_attribute: NameAttribute = None,
    email_domain: Domains = None,
) -> None:
    """Add a SAML 2.0 identity provider (an institution's)."""
    from app.core.database import session_scope
    from app.sso.saml import DEFAULT_EMAIL_ATTRIBUTE, DEFAULT_NAME_ATTRIBUTE
    from app.sso.service import add_provider

    if bool(metadata_file) == bool(metadata_url):
        raise fail("Give the identity provider's metadata: --metadata-file or --metadata-url.")
    try:
        xml = metadata_file.read_text(encoding="utf-8") if metadata_file else ""
    except OSError as exc:
        raise fail(f"Cannot read {metadata_file}: {exc.strerror}.") from None
    try:
        with session_scope() as session:
            add_provider(
                session,
                slug=slug,
                name=name,
                kind="saml",
                idp_metadata=xml,
                idp_metadata_url=metadata_url or "",
                email_attribute=email_attribute or DEFAULT_EMAIL_ATTRIBUTE,
                name_attribute=name_attribute or DEFAULT_NAME_ATTRIBUTE,
                email_domains=email_domain or [],
            )
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(f"Added {slug}; give the identity provider:")
    _show(slug)


@sso_cli.command("set")
def set_provider(
    slug: str,
    email_attribute: EmailAttribute = None,
    name_attribute: NameAttribute = None,
    email_domain: Domains = None,
) -> None:
    """Change a provider's attribute mapping or email domains."""
    from sqlalchemy import select

    from app.core.database import session_scope
    from app.sso.models import SsoProvider

    with session_scope() as session:
        row = session.scalar(select(SsoProvider).where(SsoProvider.slug == slug))
        if row is None:
            raise fail(f"There is no provider {slug}; `kernelgrader sso list` shows them.")
        if email_attribute:
            row.email_attribute = email_attribute
        if name_attribute:
            row.name_attribute = name_attribute
        if email_domain is not None:
            row.email_domains = [d.strip().lower().lstrip("@") for d in email_domain]
    typer.echo(f"Changed {slug}.")


@sso_cli.command("list")
def list_providers() -> None:
    """The providers, with what to give each."""
    from app.core.database import session_scope
    from app.sso.service import providers

    with session_scope() as session:
        rows = [(p.slug, p.kind, p.name, p.email_attribute) for p in providers(session)]
    if not rows:
        typer.echo("No university sign-in is set up.")
    for slug, kind, name, email in rows:
        typer.echo(f"{slug} ({kind}): {name}; email from '{email}'")
        _show(slug)


@sso_cli.command("remove")
def remove(slug: str) -> None:
    """Remove a provider (accounts and their other sign-ins stay)."""
    from app.core.database import session_scope
    from app.sso.service import remove_provider

    with session_scope() as session:
        if not remove_provider(session, slug=slug):
            raise fail(f"There is no provider {slug}.")
    typer.echo(f"Removed {slug}.")


@lti_cli.command("sync")
def sync() -> None:
    """Read the rosters launches asked for and send the scores due, now (workers do it too)."""
    from app.auth.routes import MISSING, installed

    if not installed():
        raise fail(MISSING)
    from app.lti.grades import send_due_scores
    from app.lti.roster import sync_wanted_rosters

    for sentence in sync_wanted_rosters():
        typer.echo(f"Roster: {sentence}")
    report = send_due_scores()
    typer.echo(
        f"Scores: {len(report.sent)} sent, {len(report.refused)} refused (tried again later); "
        f"{len(report.columns_made)} grade columns found or made."
    )
