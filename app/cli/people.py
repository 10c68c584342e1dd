"""`kernelgrader user`, `roster` and `token`: people, their roles and their API tokens."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from app.cli.common import fail
from app.core.errors import DomainError

if TYPE_CHECKING:
    from app.users.invites import IssuedInvite

user_cli = typer.Typer(help="Users and their roles.", no_args_is_help=True)
roster_cli = typer.Typer(help="Enrol many users at once.", no_args_is_help=True)
token_cli = typer.Typer(help="API tokens.", no_args_is_help=True)


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


@user_cli.command("add")
def user_add(
    email: str,
    role: Annotated[str, typer.Option(help="student, ta or instructor")],
    course: Annotated[str, typer.Option(help="the course to enrol in")],
    password: Annotated[str | None, typer.Option(help="web login password")] = None,
    name: Annotated[str, typer.Option(help="the person's name")] = "",
) -> None:
    """Create a user (or update one) and enrol them in a course with a role."""
    from app.core.database import session_scope
    from app.courses.models import Role
    from app.courses.service import enroll, get_course
    from app.users.service import ensure_user

    try:
        chosen = Role(role)
    except ValueError:
        raise fail(f"--role is student, ta or instructor, not '{role}'.") from None
    try:
        with session_scope() as session:
            found = get_course(session, slug=course)
            user = ensure_user(session, email=email, name=name, password=password)
            enroll(session, user=user, course=found, role=chosen)
            typer.echo(f"{user.email} is {_article(chosen.value)} {chosen.value} in {found.slug}.")
    except DomainError as exc:
        raise fail(exc.message) from None


@user_cli.command("invite")
def user_invite(
    email: str,
    days: Annotated[float, typer.Option(help="how long the link works")] = 7,
) -> None:
    """Print a one-time link with which the user sets a password (also a reset link).

    The operator's own tool, for any account: whoever runs this holds the database anyway.
    Setting a password through it signs the account out everywhere and revokes its API tokens.
    """
    from app.core.database import session_scope, utcnow
    from app.users.invites import issue_invite
    from app.users.service import get_user

    try:
        with session_scope() as session:
            issued = issue_invite(
                session, user=get_user(session, email=email), now=utcnow(), days=days
            )
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(
        f"A link for {email} to set a password, usable once, until "
        f"{issued.expires_at:%Y-%m-%d %H:%M} UTC (earlier links stop working):"
    )
    typer.echo(issued.url)


@roster_cli.command("import")
def roster_import(
    course: str,
    file: Path,
    invites: Annotated[
        Path | None,
        typer.Option(
            help="write a one-time password link for each account made for this course that "
            "nobody has used yet"
        ),
    ] = None,
    days: Annotated[float, typer.Option(help="how long the links work")] = 7,
) -> None:
    """Enrol everyone in a CSV file with columns email, name and (optional) role.

    The links file goes to the course's staff, so it follows the People page's rule
    (app.people.links): links only for accounts nobody has used yet.
    """
    from app.core.database import session_scope, utcnow
    from app.courses.service import get_course, import_roster
    from app.people.links import hand_out

    try:
        text = file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(f"Could not read {file}: {exc}.") from None
    links = []
    try:
        with session_scope() as session:
            found = get_course(session, slug=course)
            users = import_roster(session, course=found, text=text)
            if invites is not None:
                now = utcnow()
                for user in users:
                    handout = hand_out(
                        session, course=found, person=user, now=now, mail=False, days=days
                    )
                    if handout.issued is not None:
                        links.append(handout.issued)
            if invites is not None:
                _write_invites(invites, links)
            typer.echo(f"Enrolled {len(users)} users in {course}.")
    except DomainError as exc:
        raise fail(exc.message) from None
    if invites is not None:
        typer.echo(
            f"Wrote {len(links)} invite link{'s' if len(links) != 1 else ''} to {invites} "
            "(accounts already in use got none: they log in as they do now)."
        )


def _write_invites(path: Path, links: list[IssuedInvite]) -> None:
    from app.core.csv_out import SafeCsvWriter

    try:
        with path.open("w", encoding="utf-8", newline="") as out:
            writer = SafeCsvWriter(out)
            writer.writerow(["email", "name", "link", "expires_at"])
            for link in links:
                writer.writerow(
                    [link.user.email, link.user.name, link.url, link.expires_at.isoformat()]
                )
    except OSError as exc:
        # Raised inside the transaction, so no link is stored that nobody could hand out.
        raise fail(f"Could not write {path}: {exc}; no links were made.") from None


@token_cli.command("create")
def token_create(
    email: str, name: Annotated[str, typer.Option(help="a label for the token")] = ""
) -> None:
    """Create an API token; it is printed once, as the last line."""
    from app.core.database import session_scope
    from app.users.service import create_api_token, get_user

    try:
        with session_scope() as session:
            token = create_api_token(session, user=get_user(session, email=email), name=name)
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(f"API token for {email} (shown once; store it now):")
    typer.echo(token)


@token_cli.command("revoke")
def token_revoke(
    email: Annotated[str | None, typer.Argument(help="revoke this user's tokens")] = None,
    token: Annotated[str | None, typer.Option(help="revoke this one token")] = None,
    name: Annotated[str | None, typer.Option(help="only the user's tokens with this label")] = None,
) -> None:
    """Revoke API tokens: one token by its value, or a user's (labelled) tokens."""
    from app.core.database import session_scope
    from app.users.service import get_user, revoke_token, revoke_tokens

    if (email is None) == (token is None):
        raise fail("Give either an EMAIL or --token TOKEN (not both).")
    try:
        with session_scope() as session:
            if token is not None:
                if not revoke_token(session, token=token.strip()):
                    raise fail("That token is unknown or already revoked; nothing was changed.")
                typer.echo("Revoked 1 token.")
                return
            assert email is not None
            count = revoke_tokens(session, user=get_user(session, email=email), name=name)
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(f"Revoked {count} token{'s' if count != 1 else ''} of {email}.")
