"""`kernelgrader extension`: a student's own due date for a lab."""

from __future__ import annotations

from typing import Annotated

import typer

from app.cli.common import fail, lab_in, when
from app.core.errors import DomainError

extension_cli = typer.Typer(help="Extensions: a student's own due date.", no_args_is_help=True)


@extension_cli.command("grant")
def extension_grant(
    course: str,
    lab: str,
    email: str,
    until: Annotated[str, typer.Option(help="the student's own due date (UTC, ISO 8601)")],
    note: Annotated[str, typer.Option(help="why, for the staff")] = "",
) -> None:
    """Give a student their own due date for a lab (replaces an earlier extension)."""
    from app.core.database import session_scope
    from app.policy.rules import grant_extension
    from app.users.service import get_user

    due_at = when(until)
    assert due_at is not None
    try:
        with session_scope() as session:
            found, row = lab_in(session, course, lab)
            student = get_user(session, email=email)
            grant_extension(
                session,
                course=found,
                lab=row,
                student=student,
                due_at=due_at,
                granted_by=None,
                note=note,
            )
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(f"{email} may submit {lab} until {due_at:%Y-%m-%d %H:%M} UTC.")


@extension_cli.command("revoke")
def extension_revoke(course: str, lab: str, email: str) -> None:
    """Take an extension back: the lab's own due date applies again."""
    from app.core.database import session_scope
    from app.policy.rules import revoke_extension
    from app.users.service import get_user

    try:
        with session_scope() as session:
            _, row = lab_in(session, course, lab)
            done = revoke_extension(session, lab=row, student=get_user(session, email=email))
    except DomainError as exc:
        raise fail(exc.message) from None
    if not done:
        raise fail(f"{email} has no extension for {lab}; nothing was changed.")
    typer.echo(f"Revoked the extension of {email} for {lab}; the lab's due date applies again.")


@extension_cli.command("list")
def extension_list(
    course: str, lab: Annotated[str | None, typer.Option(help="only this lab")] = None
) -> None:
    """The course's extensions: lab, student, until, granted by."""
    from app.core.database import session_scope
    from app.courses.extensions import extensions_of
    from app.courses.service import get_course, get_lab

    try:
        with session_scope() as session:
            found = get_course(session, slug=course)
            only = get_lab(session, course=found, slug=lab) if lab else None
            rows = extensions_of(session, course=found, lab=only)
            lines = [
                f"{r.lab.slug}\t{r.student.email}\t{r.extension.due_at:%Y-%m-%d %H:%M} UTC"
                f"\t{r.granted_by.email if r.granted_by else 'CLI'}"
                + (f"\t{r.extension.note}" if r.extension.note else "")
                for r in rows
            ]
    except DomainError as exc:
        raise fail(exc.message) from None
    if not lines:
        typer.echo(f"{course} has no extensions.")
        return
    typer.echo("lab\tstudent\tuntil\tgranted by\tnote")
    for line in lines:
        typer.echo(line)
