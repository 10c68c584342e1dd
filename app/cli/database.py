"""`kernelgrader db`: the database schema."""

from __future__ import annotations

import typer

db_cli = typer.Typer(help="The database schema.", no_args_is_help=True)


def upgrade_database() -> None:
    from alembic import command

    from app.core.database import alembic_config

    command.upgrade(alembic_config(), "head")


@db_cli.command("upgrade")
def db_upgrade() -> None:
    """Create or upgrade the database schema to the newest migration."""
    upgrade_database()
    typer.echo("The database is at the newest schema.")
