"""`kernelgrader latedays` and `kernelgrader course policies`: late-day budgets."""

from __future__ import annotations

from typing import Annotated

import typer

from app.cli.common import fail
from app.core.errors import DomainError

latedays_cli = typer.Typer(help="Late days: budgets, balances, adjustments.", no_args_is_help=True)


@latedays_cli.command("show")
def latedays_show(
    course: str, email: Annotated[str | None, typer.Argument(help="one student")] = None
) -> None:
    """Every student's late days (or one student's, per lab, with their history)."""
    from app.core.database import session_scope
    from app.courses.service import get_course
    from app.latedays import service as latedays
    from app.users.service import get_user

    lines = []
    try:
        with session_scope() as session:
            found = get_course(session, slug=course)
            if email is None:
                lines.append(f"{found.slug}: {found.late_days} late days per student")
                for row in latedays.balances(session, course=found):
                    b = row.balance
                    lines.append(
                        f"{row.student.email}: {b.left} left ({b.spent} spent of {b.total})"
                    )
            else:
                student = get_user(session, email=email)
                b = latedays.balance(session, course=found, user_id=student.id)
                lines.append(f"{student.email}: {b.left} left ({b.spent} spent of {b.total})")
                for use in latedays.uses(session, course=found, user_id=student.id):
                    lines.append(
                        f"  {use.lab.slug}: {use.charge.days} spent, "
                        f"{use.charge.days_late} days late"
                    )
                for event, slug in latedays.history(session, course=found, user_id=student.id):
                    lines.append(
                        f"  {event.at:%Y-%m-%d %H:%M} {event.kind} {event.delta:+d}"
                        f"{' ' + slug if slug else ''}: {event.reason}"
                    )
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo("\n".join(lines))


@latedays_cli.command("adjust")
def latedays_adjust(
    course: str,
    email: str,
    days: Annotated[int, typer.Argument(help="days to give (negative: to take away)")],
    reason: Annotated[str, typer.Option(help="why; the student sees it")],
) -> None:
    """Give a student late days, or take some away, with a reason."""
    from app.core.database import session_scope, utcnow
    from app.courses.service import get_course
    from app.policy.settle import adjust
    from app.users.service import get_user

    try:
        with session_scope() as session:
            found = get_course(session, slug=course)
            b = adjust(
                session,
                course=found,
                student=get_user(session, email=email),
                delta=days,
                reason=reason,
                by=None,
                now=utcnow(),
            )
            left = b.left
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(f"{email} now has {left} late day{'s' if left != 1 else ''} left in {course}.")


def course_policies(
    course: str,
    late_days: Annotated[int | None, typer.Option(help="late days per student (0: none)")] = None,
    late_day_cap: Annotated[
        str | None, typer.Option(help="most late days on one lab; 'none': no cap")
    ] = None,
    regrade_window: Annotated[
        int | None,
        typer.Option(help="days after a lab's grades are released that regrade requests close"),
    ] = None,
) -> None:
    """Show or change the course's late days, per-lab cap and regrade window."""
    from app.core.database import session_scope, utcnow
    from app.courses.service import get_course
    from app.latedays.service import set_budget
    from app.policy.recount import recount_owed
    from app.policy.rules import set_regrade_window

    cap: int | None | str = "keep"
    if late_day_cap is not None:
        try:
            cap = None if late_day_cap.strip().lower() == "none" else int(late_day_cap)
        except ValueError:
            raise fail(
                f"--late-day-cap is a number of days or 'none', not {late_day_cap!r}."
            ) from None
    try:
        with session_scope() as session:
            found = get_course(session, slug=course)
            changes = []
            if regrade_window is not None:
                changes += set_regrade_window(found, regrade_window)
            changes += set_budget(session, course=found, days=late_days, cap=cap, now=utcnow())
            state = (
                f"{found.slug}: {found.late_days} late days per student, "
                f"cap {found.late_day_cap if found.late_day_cap is not None else 'none'} per lab, "
                f"regrade requests until {found.regrade_window_days} days after release."
            )
            owed = found.id if found.late_days_recount_at is not None else None
    except DomainError as exc:
        raise fail(exc.message) from None
    if owed is not None:
        recount_owed(owed)
    if changes:
        typer.echo(f"{course} now " + "; ".join(changes) + ".")
    typer.echo(state)
