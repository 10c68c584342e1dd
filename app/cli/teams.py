"""`kernelgrader team`: the staff's side of teams."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.cli.common import fail, lab_in
from app.core.errors import DomainError

team_cli = typer.Typer(help="Teams of a lab.", no_args_is_help=True)


@team_cli.command("set")
def team_set(
    course: str,
    lab: str,
    name: str,
    emails: Annotated[list[str], typer.Argument(help="the members' emails")],
) -> None:
    """Make a team (or set its members): members left out leave, students in another team of
    the lab move. Submissions made before keep their credit."""
    from app.core.database import session_scope, utcnow
    from app.teams.service import current_members, form_team

    try:
        with session_scope() as session:
            found, row = lab_in(session, course, lab)
            team = form_team(
                session, course=found, lab=row, name=name, emails=emails, by=None, now=utcnow()
            )
            members = [u.email for u in current_members(session, team=team)]
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(f"Team {name} of {lab}: {', '.join(members)}.")


@team_cli.command("import")
def team_import(
    course: str,
    lab: str,
    roster: Annotated[Path, typer.Argument(help="CSV with the columns team,email")],
) -> None:
    """Teams from a CSV (a line per member); one bad line changes nothing."""
    from app.core.database import session_scope, utcnow
    from app.teams.service import import_teams

    try:
        text = roster.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(f"Could not read {roster}: {exc}.") from None
    try:
        with session_scope() as session:
            found, row = lab_in(session, course, lab)
            made = import_teams(session, course=found, lab=row, text=text, by=None, now=utcnow())
            names = [t.name for t in made]
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(
        f"Set {len(names)} team{'s' if len(names) != 1 else ''} of {lab}: {', '.join(names)}."
    )


@team_cli.command("list")
def team_list(course: str, lab: str) -> None:
    """The lab's teams and their members (and open invitations)."""
    from app.core.database import session_scope
    from app.teams.service import teams_of

    try:
        with session_scope() as session:
            _, row = lab_in(session, course, lab)
            lines = [
                f"{v.team.name}: {', '.join(v.emails) or '(nobody)'}"
                + (f" (invited: {', '.join(u.email for u in v.invited)})" if v.invited else "")
                for v in teams_of(session, lab=row)
            ]
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo("\n".join(lines) if lines else f"{lab} has no teams.")


@team_cli.command("remove")
def team_remove(course: str, lab: str, email: str) -> None:
    """Take a student out of their team; their earlier submissions keep their credit."""
    from app.core.database import session_scope, utcnow
    from app.teams.service import remove_member
    from app.users.service import get_user

    try:
        with session_scope() as session:
            _, row = lab_in(session, course, lab)
            left = remove_member(
                session, lab=row, user=get_user(session, email=email), now=utcnow()
            )
            name = left.name if left else None
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(f"{email} left the team {name}." if name else f"{email} was in no team of {lab}.")
