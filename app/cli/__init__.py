"""The `kernelgrader` command: serve, worker, and the operations an instructor runs.

One module per command group; this one puts them under one Typer app, in the order `--help`
lists them."""

from __future__ import annotations

import typer

from app.cli import (
    admin,
    courses,
    database,
    extensions,
    fleet,
    grading,
    latedays,
    people,
    regrades,
    sign_in,
    similarity,
    teams,
    workers,
)
from app.cli.common import require_database

cli = typer.Typer(help="kernelgrader: a CUDA kernel autograder.", no_args_is_help=True)
for command in (grading.regrade, workers.status, workers.worker, workers.serve):
    cli.command()(command)
for sub, name in [
    (database.db_cli, "db"),
    (courses.course_cli, "course"),
    (courses.lab_cli, "lab"),
    (people.user_cli, "user"),
    (people.roster_cli, "roster"),
    (people.token_cli, "token"),
    (grading.gradebook_cli, "gradebook"),
    (extensions.extension_cli, "extension"),
    (sign_in.sso_cli, "sso"),
    (sign_in.lti_cli, "lti"),
    (admin.admin_cli, "admin"),
    (teams.team_cli, "team"),
    (latedays.latedays_cli, "latedays"),
    (regrades.request_cli, "regrade-request"),
    (regrades.rubric_cli, "rubric"),
    (similarity.similarity_cli, "similarity"),
    (fleet.fleet_cli, "fleet"),
]:
    cli.add_typer(sub, name=name)
courses.course_cli.command("policies")(latedays.course_policies)


# Commands that may create the database (or, for `lab`, check its own sub-commands: `lab check`
# reads a folder only).
MAKE_OR_SKIP_DATABASE = {"serve", "db", "lab"}


@cli.callback()
def check_settings(ctx: typer.Context) -> None:
    """Refuse to start, in a sentence, when the settings are not usable, or when the command
    would open a SQLite database that does not exist."""
    from pydantic import ValidationError

    from app.core.settings import get_settings

    try:
        get_settings()
    except ValidationError as exc:
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"])
            message = str(error["msg"]).removeprefix("Value error, ")
            typer.secho(f"{where + ': ' if where else ''}{message}", err=True, fg="red")
        raise typer.Exit(code=2) from None
    if ctx.invoked_subcommand not in MAKE_OR_SKIP_DATABASE:
        require_database()


def main() -> None:
    cli()
