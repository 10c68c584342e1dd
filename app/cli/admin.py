"""`kernelgrader admin`: site administrators, who register LMSs and read every sign-in
refusal (app.users.site_admins). Running the command is the authority: it needs the database."""

from __future__ import annotations

import typer

from app.cli.common import fail
from app.core.errors import DomainError

admin_cli = typer.Typer(
    help="Site administrators (LMS registrations, sign-in records).", no_args_is_help=True
)


def _change(email: str, *, grant: bool) -> None:
    from app.core.database import session_scope
    from app.users import site_admins

    try:
        with session_scope() as session:
            change = site_admins.grant if grant else site_admins.revoke
            user = change(session, email=email)
            typer.echo(f"{user.email} is {'' if grant else 'not '}a site administrator.")
    except DomainError as exc:
        raise fail(exc.message) from None


@admin_cli.command("grant")
def grant(email: str) -> None:
    """Make an account a site administrator (it becomes staff of no course by it)."""
    _change(email, grant=True)


@admin_cli.command("revoke")
def revoke(email: str) -> None:
    """Take the role back (the last site administrator keeps it)."""
    _change(email, grant=False)


@admin_cli.command("list")
def list_admins() -> None:
    """The site administrators."""
    from app.core.database import session_scope
    from app.users import site_admins

    with session_scope() as session:
        emails = [user.email for user in site_admins.site_admins(session)]
    if not emails:
        typer.echo("No site administrator yet; `kernelgrader admin grant EMAIL` makes one.")
    for email in emails:
        typer.echo(email)
