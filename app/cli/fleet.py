"""`kernelgrader fleet`: the plan and state of the borrowed workers, and the loop that borrows
them (app.fleet.autoscale)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated

import typer

from app.cli.common import fail

if TYPE_CHECKING:
    from app.core.fleet_settings import FleetSettings

fleet_cli = typer.Typer(
    help="Workers borrowed from a cluster's scheduler (Slurm), scaled by the queue.",
    no_args_is_help=True,
)


def _settings() -> FleetSettings:
    from app.core.fleet_settings import FleetSettingsInvalid, fleet_settings

    try:
        return fleet_settings()
    except FleetSettingsInvalid as exc:
        raise fail(exc.message) from None


@fleet_cli.command("status")
def fleet_status() -> None:
    """What the policy wants per GPU model and why, the borrowed workers' jobs, the loop."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.cli.workers import database_trouble
    from app.core.database import session_scope
    from app.fleet.plan_text import render_fleet
    from app.fleet.view import fleet_view

    settings = _settings()
    try:
        with session_scope() as session:
            view = fleet_view(session, settings=settings)
    except SQLAlchemyError as exc:
        raise fail(database_trouble(exc)) from None
    typer.echo(render_fleet(view), nl=False)


@fleet_cli.command("run")
def fleet_run(
    once: Annotated[bool, typer.Option(help="one pass, then exit (from cron, say)")] = False,
) -> None:
    """Carry the plan out: submit, cancel and drain borrowed workers, a pass every
    KERNELGRADER_FLEET_TICK_SECONDS, until SIGTERM or Ctrl-C."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.cli.workers import database_trouble
    from app.fleet.autoscale import FleetLoop, backend_for

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = _settings()
    backend = backend_for(settings)
    if backend is None:
        raise fail(
            "No scheduler is set: set KERNELGRADER_FLEET_BACKEND=slurm (and the "
            'KERNELGRADER_SLURM_* settings; see the README\'s "Borrowing GPUs from Slurm"). '
            "`kernelgrader fleet status` shows the plan meanwhile."
        )
    loop = FleetLoop(backend, settings)
    if not once:
        raise typer.Exit(code=loop.run())
    try:
        report = loop.once()
    except SQLAlchemyError as exc:
        raise fail(database_trouble(exc)) from None
    if report is None:
        typer.echo("Another fleet loop holds the lease and acts; this one did nothing.")
        return
    typer.echo(report.summary() + ("" if report.summary().endswith(".") else "."))
    if report.errors:
        raise typer.Exit(code=1)
