"""`kernelgrader regrade` and `kernelgrader gradebook`: grading a lab again, and the grades
(the app in __init__.py registers regrade)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from app.cli.common import fail, lab_in
from app.core.errors import DomainError

gradebook_cli = typer.Typer(help="The gradebook.", no_args_is_help=True)


def regrade(
    course: str,
    lab: str,
    counted_only: Annotated[
        bool, typer.Option(help="only each student's counted submission, not every one")
    ] = False,
) -> None:
    """Regrade a whole lab (after fixing it). The jobs wait behind students' new uploads: the
    workers' sweep sends a few at a time, only while no new submission waits."""
    from app.core.database import session_scope, utcnow
    from app.grading.bulk import regrade_lab

    try:
        with session_scope() as session:
            _, row = lab_in(session, course, lab)
            result = regrade_lab(
                session, lab=row, requested_by="the CLI", now=utcnow(), counted_only=counted_only
            )
    except DomainError as exc:
        raise fail(exc.message) from None
    skipped = f"; {result.skipped} already waiting or grading" if result.skipped else ""
    typer.echo(
        f"Queued {result.queued} submission{'s' if result.queued != 1 else ''} of {lab} for a "
        f"regrade{skipped}. Running workers send them a few at a time, behind new uploads."
        + (f" {result.versions()}" if result.versions() else "")
    )


@gradebook_cli.command("export")
def gradebook_export(
    course: str,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="file (default stdout)")
    ] = None,
) -> None:
    """Write the course's gradebook as CSV."""
    from app.core.database import session_scope
    from app.courses.service import get_course
    from app.gradebook.service import write_gradebook_csv

    try:
        with session_scope() as session:
            found = get_course(session, slug=course)
            if output is None:
                write_gradebook_csv(session, course=found, out=sys.stdout)
                sys.stdout.flush()
                return
            with output.open("w", encoding="utf-8", newline="") as out:
                write_gradebook_csv(session, course=found, out=out)
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(f"Wrote {output}.")
