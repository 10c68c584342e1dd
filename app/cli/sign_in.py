"""`kernelgrader sso` (university sign-in providers) and `kernelgrader lti` (LMS
registrations, made by whoever runs the command: a site administrator, and their sync)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from app.cli.common import fail
from app.core.errors import DomainError

if TYPE_CHECKING:
    from app.lti.registrations import RegistrationValues

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
    _lti_installed()
    from app.lti.grades import send_due_scores
    from app.lti.roster import sync_wanted_rosters

    for sentence in sync_wanted_rosters():
        typer.echo(f"Roster: {sentence}")
    report = send_due_scores()
    typer.echo(
        f"Scores: {len(report.sent)} sent, {len(report.refused)} refused (tried again later); "
        f"{len(report.columns_made)} grade columns found or made."
    )


Url = Annotated[str, typer.Option(help="as the LMS shows it")]


def _values(
    issuer: str,
    client_id: str,
    deployment: list[str],
    login_url: str,
    token_url: str,
    key_set_url: str,
    name: str,
    audience: str,
) -> RegistrationValues:
    from app.lti.registrations import RegistrationValues

    return RegistrationValues(
        name=name,
        issuer=issuer,
        client_id=client_id,
        deployment_ids=",".join(deployment),
        auth_login_url=login_url,
        auth_token_url=token_url,
        key_set_url=key_set_url,
        auth_audience=audience,
    )


def _lti_installed() -> None:
    from app.auth.pages import MISSING, installed

    if not installed():
        raise fail(MISSING)


@lti_cli.command("add")
def lti_add(
    slug: str,
    issuer: Url,
    client_id: Url,
    deployment: Annotated[list[str], typer.Option(help="a deployment id (repeat)")],
    login_url: Annotated[str, typer.Option(help="the LMS's OIDC authentication URL")],
    token_url: Annotated[str, typer.Option(help="the LMS's access token URL")],
    key_set_url: Annotated[str, typer.Option(help="the LMS's key set (JWKS) URL")],
    name: Annotated[str, typer.Option(help="what people call it")] = "",
    audience: Annotated[str, typer.Option(help="the token audience (D2L)")] = "",
) -> None:
    """Register an LMS for the whole server, with a signing key of its own."""
    _lti_installed()
    from app.core.database import session_scope
    from app.lti.registrations import create_registration, tool_urls

    values = _values(
        issuer, client_id, deployment, login_url, token_url, key_set_url, name, audience
    )
    try:
        with session_scope() as session:
            create_registration(session, slug=slug, values=values, by=None)
    except DomainError as exc:
        raise fail(exc.message) from None
    urls = tool_urls(slug)
    typer.echo(f"Registered {slug}; give the LMS:")
    typer.echo(f"  login URL:  {urls['login']}")
    typer.echo(f"  launch / deep linking URL:  {urls['launch']}")
    typer.echo(f"  key set URL:  {urls['jwks']}")


@lti_cli.command("set")
def lti_set(
    slug: str,
    issuer: Annotated[str | None, typer.Option()] = None,
    client_id: Annotated[str | None, typer.Option()] = None,
    deployment: Annotated[list[str] | None, typer.Option(help="replaces the list")] = None,
    login_url: Annotated[str | None, typer.Option()] = None,
    token_url: Annotated[str | None, typer.Option()] = None,
    key_set_url: Annotated[str | None, typer.Option()] = None,
    name: Annotated[str | None, typer.Option()] = None,
    audience: Annotated[str | None, typer.Option()] = None,
) -> None:
    """Change what an LMS's registration holds; its users, links and key stay."""
    _lti_installed()
    from app.core.database import session_scope
    from app.lti.registrations import get_registration, update_registration

    try:
        with session_scope() as session:
            p = get_registration(session, slug=slug)
            values = _values(
                issuer or p.issuer,
                client_id or p.client_id,
                deployment or list(p.deployment_ids),
                login_url or p.auth_login_url,
                token_url or p.auth_token_url,
                key_set_url or p.key_set_url,
                p.name if name is None else name,
                p.auth_audience if audience is None else audience,
            )
            update_registration(session, platform=p, values=values)
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(f"Changed {slug}.")


@lti_cli.command("list")
def lti_list() -> None:
    """The LMS registrations, each with the key set URL its LMS reads."""
    _lti_installed()
    from app.core.database import session_scope
    from app.lti.registrations import registrations, tool_urls

    with session_scope() as session:
        rows = [
            (p.slug, p.name, p.issuer, p.client_id, list(p.deployment_ids), p.shared_key)
            for p in registrations(session)
        ]
    if not rows:
        typer.echo("No LMS is registered.")
    for slug, name, issuer, client_id, deployments, shared in rows:
        urls = tool_urls(slug)
        typer.echo(f"{slug}: {name}; issuer {issuer}, client id {client_id}")
        typer.echo(f"  deployments: {', '.join(deployments)}")
        key = f"{urls['shared_jwks']} (the shared key: rotate it)" if shared else urls["jwks"]
        typer.echo(f"  key set URL:  {key}")


@lti_cli.command("rotate-key")
def lti_rotate_key(slug: str) -> None:
    """Give a registration a new key of its own (one still on the shared key leaves it)."""
    _lti_installed()
    from app.core.database import session_scope
    from app.lti.keys import make_key
    from app.lti.registrations import get_registration, tool_urls

    try:
        with session_scope() as session:
            make_key(session, platform=get_registration(session, slug=slug))
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(
        f"{slug} signs with a new key, served at {tool_urls(slug)['jwks']} (the old one stays "
        "there an hour); that is the key set URL its LMS must have."
    )


@lti_cli.command("remove")
def lti_remove(slug: str) -> None:
    """Remove a registration with its LMS courses' links and LMS sign-ins (accounts stay)."""
    _lti_installed()
    from app.core.database import session_scope
    from app.lti.registrations import get_registration, remove_registration

    try:
        with session_scope() as session:
            gone = remove_registration(session, platform=get_registration(session, slug=slug))
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(
        f"Removed {slug}, with {gone.contexts} LMS courses' links and {gone.identities} LMS "
        "sign-ins; accounts and submissions stay."
    )
