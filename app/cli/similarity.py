"""`kernelgrader similarity`: a lab's similarity report, computed by a worker."""

from __future__ import annotations

from typing import Annotated

import typer

from app.cli.common import SEND_SECONDS, fail, lab_in
from app.core.errors import DomainError

similarity_cli = typer.Typer(help="Similarity reports of a lab.", no_args_is_help=True)


@similarity_cli.command("run")
def similarity_run(
    course: str,
    lab: str,
    include_past: Annotated[
        bool,
        typer.Option(
            help="also compare with the same lab in the course's linked earlier offerings"
        ),
    ] = False,
) -> None:
    """Ask a worker to compute a report of the lab's counted submissions."""
    from app.core.database import session_scope, utcnow
    from app.jobs.sender import job_sender
    from app.similarity.service import request_report

    try:
        with session_scope() as session:
            found, row = lab_in(session, course, lab)
            report = request_report(
                session, course=found, lab=row, user=None, include_past=include_past, now=utcnow()
            )
            report_id = report.id
    except DomainError as exc:
        raise fail(exc.message) from None
    job_sender.wait_sent(SEND_SECONDS)  # its job went to the sender at the commit
    typer.echo(
        f"Report {report_id} of {lab} is queued for a worker; "
        f"`kernelgrader similarity show {report_id}` reads it when done."
    )


@similarity_cli.command("show")
def similarity_show(report_id: int) -> None:
    """A report's state and its most similar pairs."""
    from app.core.database import session_scope
    from app.similarity.models import SimilarityReport
    from app.similarity.service import pairs_of

    with session_scope() as session:
        report = session.get(SimilarityReport, report_id)
        if report is None:
            raise fail(f"There is no similarity report {report_id}.")
        lines = [
            f"Report {report.id}: {report.state}" + (f" ({report.error})" if report.error else "")
        ]
        for shown in pairs_of(session, report=report):
            p = shown.pair
            shares = f"{p.a_similarity:4.0%} / {p.b_similarity:4.0%}"
            lines.append(f"{p.rank:3d}. {shares}  {shown.a_label}  <->  {shown.b_label}")
    typer.echo("\n".join(lines))
