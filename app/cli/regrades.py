"""`kernelgrader regrade-request` and `kernelgrader rubric`: the staff's side of regrade
requests and rubric points."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from app.cli.common import SEND_SECONDS, fail, lab_in
from app.core.errors import DomainError

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from app.users.models import User

request_cli = typer.Typer(help="Regrade requests.", no_args_is_help=True)
rubric_cli = typer.Typer(help="Rubric points on top of the autograde.", no_args_is_help=True)


def _rubric_followed() -> None:
    """A rubric change made here reaches the LMS's columns, as one made in the web app does."""
    from app.lti.scores import follow_rubric

    follow_rubric()


def _staff(session: Session, course: str, email: str) -> User:
    from app.courses.service import get_course, require_staff
    from app.users.service import get_user

    user = get_user(session, email=email)
    require_staff(session, user=user, course=get_course(session, slug=course))
    return user


@request_cli.command("list")
def request_list(
    course: str,
    lab: str,
    state: Annotated[str, typer.Option(help="open, accepted, declined, withdrawn or all")] = "open",
) -> None:
    """The lab's regrade requests, oldest first."""
    from sqlalchemy import select

    from app.core.database import session_scope
    from app.courses.models import Enrollment, Role
    from app.regrades.service import queue
    from app.users.models import User

    lines = []
    try:
        with session_scope() as session:
            found, row = lab_in(session, course, lab)
            # The CLI runs as the course's operator: it reads as one of its instructors.
            staff = session.scalar(
                select(User)
                .join(Enrollment, Enrollment.user_id == User.id)
                .where(Enrollment.course_id == found.id, Enrollment.role == Role.instructor.value)
                .order_by(User.id)
                .limit(1)
            )
            if staff is None:
                raise fail(f"{course} has no instructor to read its requests as.")
            for r in queue(
                session, user=staff, course=found, lab=row, state=None if state == "all" else state
            ):
                q = r.request
                case = f" case {q.case_name}" if q.case_name else ""
                answered = f"\n    answer: {q.answer}" if q.answer else ""
                lines.append(
                    f"#{q.id} {q.state} submission {q.submission_id}{case} by "
                    f"{r.student.email}: {q.text}{answered}"
                )
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo("\n".join(lines) if lines else f"No {state} regrade requests for {lab}.")


@request_cli.command("answer")
def request_answer(
    course: str,
    request_id: int,
    decision: Annotated[str, typer.Argument(help="regrade, adjust or decline")],
    answer: Annotated[str, typer.Option(help="the answer the student reads")],
    staff: Annotated[str, typer.Option(help="the staff member answering (their email)")],
    points: Annotated[float | None, typer.Option(help="for adjust: points to add")] = None,
) -> None:
    """Answer a request: regrade the submission, adjust its points, or decline."""
    from app.core.database import session_scope, utcnow
    from app.jobs.sender import job_sender
    from app.regrades.service import answer as answer_request

    try:
        with session_scope() as session:
            user = _staff(session, course, staff)
            request, _job = answer_request(
                session,
                user=user,
                request_id=request_id,
                decision=decision,
                text=answer,
                points=points,
                now=utcnow(),
            )
            state = request.state
    except DomainError as exc:
        raise fail(exc.message) from None
    # A regrade's job went to the sender at the commit; sent before the command ends (one the
    # broker refuses is taken back, and the workers' sweep sends it).
    job_sender.wait_sent(SEND_SECONDS)
    typer.echo(f"Request {request_id} is {state}.")


@rubric_cli.command("add")
def rubric_add(
    course: str,
    lab: str,
    title: str,
    points: Annotated[float, typer.Argument(help="the item's points possible")],
    description: Annotated[str, typer.Option(help="what the staff look for")] = "",
) -> None:
    """Add a staff-graded item to a lab (its points are added to the lab's)."""
    from app.core.database import session_scope
    from app.rubric.service import add_item

    _rubric_followed()
    try:
        with session_scope() as session:
            _, row = lab_in(session, course, lab)
            item = add_item(
                session, lab=row, title=title, max_points=points, description=description
            )
            item_id = item.id
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(f"Rubric item {item_id} of {lab}: {title} ({points:g} points).")


@rubric_cli.command("edit")
def rubric_edit(
    course: str,
    lab: str,
    item: Annotated[int, typer.Argument(help="the item's id (rubric list)")],
    title: Annotated[str | None, typer.Option(help="a new title")] = None,
    points: Annotated[float | None, typer.Option(help="new points possible")] = None,
    description: Annotated[str | None, typer.Option(help="what the staff look for")] = None,
) -> None:
    """Change a rubric item's title, points or description (the lab's maximum follows)."""
    from app.core.database import session_scope
    from app.rubric.service import update_item

    _rubric_followed()
    try:
        with session_scope() as session:
            _, row = lab_in(session, course, lab)
            edited, changes = update_item(
                session,
                lab=row,
                item_id=item,
                title=title,
                max_points=points,
                description=description,
            )
            said = f"Rubric item {item} of {lab} " + (
                "; ".join(changes) + "." if changes else f"({edited.title}): nothing changed."
            )
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(said)


@rubric_cli.command("remove")
def rubric_remove(
    course: str,
    lab: str,
    item: Annotated[int, typer.Argument(help="the item's id (rubric list)")],
) -> None:
    """Remove a rubric item and every student's points on it."""
    from app.core.database import session_scope
    from app.rubric.service import graded_per_item, remove_item

    _rubric_followed()
    try:
        with session_scope() as session:
            _, row = lab_in(session, course, lab)
            graded = graded_per_item(session, lab=row).get(item, 0)
            gone = remove_item(session, lab=row, item_id=item)
            said = (
                f"Removed rubric item {item} of {lab} ({gone.title}) and the points of "
                f"{graded} student{'s' if graded != 1 else ''} on it."
            )
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(said)


@rubric_cli.command("list")
def rubric_list(course: str, lab: str) -> None:
    """The lab's rubric items."""
    from app.core.database import session_scope
    from app.rubric.service import items_of

    try:
        with session_scope() as session:
            _, row = lab_in(session, course, lab)
            lines = [
                f"{i.id}: {i.title} ({i.max_points:g} points)" for i in items_of(session, lab=row)
            ]
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo("\n".join(lines) if lines else f"{lab} has no rubric items.")


@rubric_cli.command("grade")
def rubric_grade(
    course: str,
    lab: str,
    email: str,
    item: int,
    points: float,
    comment: Annotated[str, typer.Option(help="what the student reads")] = "",
) -> None:
    """Give a student points on one rubric item."""
    from app.core.database import session_scope, utcnow
    from app.rubric.service import grade
    from app.users.service import get_user

    _rubric_followed()
    try:
        with session_scope() as session:
            found, row = lab_in(session, course, lab)
            grade(
                session,
                course=found,
                lab=row,
                student=get_user(session, email=email),
                scores={item: (points, comment)},
                by=None,
                now=utcnow(),
            )
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(f"{email}: {points:g} points on item {item} of {lab}.")
