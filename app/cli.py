"""The `kernelgrader` command: serve, worker, and the operations an instructor runs."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from app.core.errors import DomainError

cli = typer.Typer(help="kernelgrader: a CUDA kernel autograder.", no_args_is_help=True)
db_cli = typer.Typer(help="The database schema.", no_args_is_help=True)
course_cli = typer.Typer(help="Courses.", no_args_is_help=True)
lab_cli = typer.Typer(help="Labs in a course.", no_args_is_help=True)
user_cli = typer.Typer(help="Users and their roles.", no_args_is_help=True)
roster_cli = typer.Typer(help="Enrol many users at once.", no_args_is_help=True)
token_cli = typer.Typer(help="API tokens.", no_args_is_help=True)
gradebook_cli = typer.Typer(help="The gradebook.", no_args_is_help=True)
for sub, name in [
    (db_cli, "db"),
    (course_cli, "course"),
    (lab_cli, "lab"),
    (user_cli, "user"),
    (roster_cli, "roster"),
    (token_cli, "token"),
    (gradebook_cli, "gradebook"),
]:
    cli.add_typer(sub, name=name)


@cli.callback()
def check_settings() -> None:
    """Refuse to start, in a sentence, when the settings are not usable."""
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


def _fail(message: str) -> typer.Exit:
    typer.secho(message, err=True, fg=typer.colors.RED)
    return typer.Exit(code=1)


def _when(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise _fail(f"'{text}' is not a date; write it like 2026-12-01T23:59 (UTC).") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def upgrade_database() -> None:
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option(
        "script_location", str(Path(__file__).resolve().parent.parent / "migrations")
    )
    command.upgrade(config, "head")


@db_cli.command("upgrade")
def db_upgrade() -> None:
    """Create or upgrade the database schema to the newest migration."""
    upgrade_database()
    typer.echo("The database is at the newest schema.")


@course_cli.command("create")
def course_create(
    slug: str, title: Annotated[str, typer.Option(help="the course's full name")] = ""
) -> None:
    """Create a course."""
    from app.core.database import session_scope
    from app.courses.service import create_course

    try:
        with session_scope() as session:
            course = create_course(session, slug=slug, title=title or slug)
            typer.echo(f"Created course {course.slug}: {course.title}")
    except DomainError as exc:
        raise _fail(exc.message) from None


@lab_cli.command("add")
def lab_add(
    course: str,
    lab: Annotated[str, typer.Argument(help="a built-in lab id or a lab folder")],
    release: Annotated[str | None, typer.Option(help="opens at (UTC, ISO 8601)")] = None,
    due: Annotated[str | None, typer.Option(help="due at (UTC, ISO 8601)")] = None,
    policy: Annotated[str, typer.Option(help="which submission counts: best or last")] = "best",
    late: Annotated[str, typer.Option(help="after the due date: accept or refuse")] = "accept",
) -> None:
    """Add a lab to a course."""
    from app.core.database import session_scope
    from app.courses.models import LatePolicy, ScorePolicy
    from app.courses.service import add_lab, get_course

    try:
        score_policy, late_policy = ScorePolicy(policy), LatePolicy(late)
    except ValueError:
        raise _fail("--policy is best or last, and --late is accept or refuse.") from None
    try:
        with session_scope() as session:
            row = add_lab(
                session,
                course=get_course(session, slug=course),
                ref=lab,
                release_at=_when(release),
                due_at=_when(due),
                score_policy=score_policy,
                late_policy=late_policy,
            )
            typer.echo(
                f"Added lab {row.slug} ({row.title}) to {course}, max score {row.max_score:g}."
            )
    except DomainError as exc:
        raise _fail(exc.message) from None


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
        raise _fail(f"--role is student, ta or instructor, not '{role}'.") from None
    try:
        with session_scope() as session:
            found = get_course(session, slug=course)
            user = ensure_user(session, email=email, name=name, password=password)
            enroll(session, user=user, course=found, role=chosen)
            typer.echo(f"{user.email} is a {chosen.value} in {found.slug}.")
    except DomainError as exc:
        raise _fail(exc.message) from None


@roster_cli.command("import")
def roster_import(course: str, file: Path) -> None:
    """Enrol everyone in a CSV file with columns email, name and (optional) role."""
    from app.core.database import session_scope
    from app.courses.service import get_course, import_roster

    try:
        text = file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(f"Could not read {file}: {exc}.") from None
    try:
        with session_scope() as session:
            users = import_roster(session, course=get_course(session, slug=course), text=text)
            typer.echo(f"Enrolled {len(users)} users in {course}.")
    except DomainError as exc:
        raise _fail(exc.message) from None


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
        raise _fail(exc.message) from None
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
        raise _fail("Give either an EMAIL or --token TOKEN (not both).")
    try:
        with session_scope() as session:
            if token is not None:
                if not revoke_token(session, token=token.strip()):
                    raise _fail("That token is unknown or already revoked; nothing was changed.")
                typer.echo("Revoked 1 token.")
                return
            assert email is not None
            count = revoke_tokens(session, user=get_user(session, email=email), name=name)
    except DomainError as exc:
        raise _fail(exc.message) from None
    typer.echo(f"Revoked {count} token{'s' if count != 1 else ''} of {email}.")


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
        raise _fail(exc.message) from None
    typer.echo(f"Wrote {output}.")


def _watch_parent(parent_pid: int) -> None:
    # The local worker of `serve` exits when serve does, even if serve was killed.
    def watch() -> None:
        while True:
            if os.getppid() != parent_pid:
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


@cli.command()
def worker(
    parent_pid: Annotated[int | None, typer.Option(hidden=True)] = None,
    loglevel: Annotated[str, typer.Option(help="Celery log level")] = "INFO",
) -> None:
    """Run a grading worker (one per GPU): compiles, and runs kernels where a GPU is."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    from app.grading.celery_app import GPU_QUEUE, QUEUE, celery_app
    from app.grading.gpu_probe import run_unavailable_reason
    from app.grading.sandbox_cleanup import remove_orphaned_sandboxes
    from app.grading.sweeper import SweeperThread

    if parent_pid is not None:
        _watch_parent(parent_pid)
    removed = remove_orphaned_sandboxes()
    if removed:
        typer.echo(f"Removed {len(removed)} sandbox folders left by workers that were killed.")
    reason = run_unavailable_reason()
    queues = QUEUE if reason else f"{QUEUE},{GPU_QUEUE}"
    if reason:
        typer.echo(f"This worker compiles only: {reason}")
    else:
        typer.echo("This worker compiles and runs kernels on the GPU.")
    SweeperThread(has_gpu=reason is None).start()
    celery_app.worker_main(
        [
            "worker",
            "--pool=solo",
            f"--loglevel={loglevel}",
            f"--queues={queues}",
            f"--hostname=kernelgrader-{os.getpid()}@%h",
            "--without-gossip",
            "--without-mingle",
        ]
    )


@cli.command()
def serve(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8000,
    local_worker: Annotated[bool, typer.Option(help="start a worker beside the server")] = True,
) -> None:
    """Serve the web pages and API, with a local worker, on the configured database."""
    import uvicorn

    from app.bootstrap import bootstrap_if_empty
    from app.core.database import session_scope
    from app.core.settings import get_settings

    settings = get_settings()  # checked by the callback above
    settings.ensure_data_dir()
    upgrade_database()
    with session_scope() as session:
        first = bootstrap_if_empty(session)
    if first is not None:
        _print_first_run(first, host, port)
    child = None
    if local_worker:
        # A separate process: the worker may load CUDA, which must stay out of the web server.
        child = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "worker", "--parent-pid", str(os.getpid())]
        )
    try:
        uvicorn.run("app.main:create_app", factory=True, host=host, port=port)
    finally:
        if child is not None:
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()


def _print_first_run(first: object, host: str, port: int) -> None:
    from app.bootstrap import FirstRun

    assert isinstance(first, FirstRun)
    shown = "localhost" if host in ("0.0.0.0", "127.0.0.1", "::") else host
    lines = [
        "",
        "First run: created the course 'demo' with the built-in labs: "
        + (", ".join(first.labs) or "none found"),
        *[f"  skipped {s}" for s in first.skipped],
        f"Open http://{shown}:{port}/ and log in as {first.email} with password {first.password}",
        "An API token for that account (shown once):",
        f"  {first.token}",
        "",
    ]
    typer.secho("\n".join(lines), fg=typer.colors.GREEN)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
