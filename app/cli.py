"""The `kernelgrader` command: serve, worker, and the operations an instructor runs."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from sqlalchemy.exc import SQLAlchemyError

from app.core.errors import DomainError

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from app.courses.models import Course, Lab
    from app.courses.service import Keep
    from app.users.invites import IssuedInvite

cli = typer.Typer(help="kernelgrader: a CUDA kernel autograder.", no_args_is_help=True)
db_cli = typer.Typer(help="The database schema.", no_args_is_help=True)
course_cli = typer.Typer(help="Courses.", no_args_is_help=True)
lab_cli = typer.Typer(help="Labs in a course.", no_args_is_help=True)
user_cli = typer.Typer(help="Users and their roles.", no_args_is_help=True)
roster_cli = typer.Typer(help="Enrol many users at once.", no_args_is_help=True)
token_cli = typer.Typer(help="API tokens.", no_args_is_help=True)
gradebook_cli = typer.Typer(help="The gradebook.", no_args_is_help=True)
extension_cli = typer.Typer(help="Extensions: a student's own due date.", no_args_is_help=True)
for sub, name in [
    (db_cli, "db"),
    (course_cli, "course"),
    (lab_cli, "lab"),
    (user_cli, "user"),
    (roster_cli, "roster"),
    (token_cli, "token"),
    (gradebook_cli, "gradebook"),
    (extension_cli, "extension"),
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


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _database_trouble(exc: Exception) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return (
        f"The database could not be read ({first}); check KERNELGRADER_DATABASE_URL, and run "
        "`kernelgrader db upgrade` if this release's schema is newer than the database's."
    )


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

    from app.core.database import alembic_config

    command.upgrade(alembic_config(), "head")


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


def _check_lab_folder(folder: Path, *, run: bool, arch: str | None, quiet: bool) -> bool:
    """Print what `graders.labcheck` finds (all of it, or only problems when quiet)."""
    from app.core.settings import get_settings
    from graders.labcheck import CheckItem, check_lab

    def show(item: CheckItem) -> None:
        if quiet and item.status in ("ok", "skip"):
            return
        color = {"fail": typer.colors.RED, "warn": typer.colors.YELLOW}.get(item.status)
        typer.secho(f"  {item.status:<4}  {item.subject}: {item.message}", fg=color)

    report = check_lab(
        folder, run=run, secret=get_settings().grading_secret, arch=arch, progress=show
    )
    if not report.ok:
        typer.secho(report.summary(), fg=typer.colors.RED)
    elif not quiet:
        typer.echo(report.summary())
    return report.ok


@lab_cli.command("check")
def lab_check(
    folder: Annotated[Path, typer.Argument(help="the lab folder (holding lab.toml)")],
    gpu: Annotated[bool, typer.Option(help="run the kernels where a GPU is usable")] = True,
    arch: Annotated[str | None, typer.Option(help="compile for this sm_XX")] = None,
) -> None:
    """Check a lab folder: spec, oracle, references, faulty kernels (and on a GPU, verdicts)."""
    if not folder.is_dir():
        raise _fail(f"{folder} is not a folder; give the lab's folder, the one holding lab.toml.")
    typer.echo(f"Checking the lab folder {folder}:")
    if not _check_lab_folder(folder, run=gpu, arch=arch, quiet=False):
        raise typer.Exit(code=1)


@lab_cli.command("add")
def lab_add(
    course: str,
    lab: Annotated[str, typer.Argument(help="a built-in lab id or a lab folder")],
    release: Annotated[str | None, typer.Option(help="opens at (UTC, ISO 8601)")] = None,
    due: Annotated[str | None, typer.Option(help="due at (UTC, ISO 8601)")] = None,
    policy: Annotated[
        str,
        typer.Option("--score-policy", "--policy", help="which submission counts: best or last"),
    ] = "best",
    late: Annotated[
        str,
        typer.Option("--late-policy", "--late", help="after the due date: accept or refuse"),
    ] = "accept",
    gpu_model: Annotated[
        str,
        typer.Option(
            help="the GPU model its timings belong to (e.g. H100), instead of the spec's; "
            "only workers with such a GPU run it"
        ),
    ] = "",
) -> None:
    """Add a lab to a course."""
    from app.core.database import session_scope
    from app.courses.models import LatePolicy, ScorePolicy
    from app.courses.service import add_lab, get_course

    try:
        score_policy, late_policy = ScorePolicy(policy), LatePolicy(late)
    except ValueError:
        raise _fail("--policy is best or last, and --late is accept or refuse.") from None
    # A lab folder is checked (without running kernels) before students can meet it; the
    # built-in labs are checked by the test suite.
    if Path(lab).is_dir() and not _check_lab_folder(Path(lab), run=False, arch=None, quiet=True):
        raise _fail(f"The lab was not added; check it with `kernelgrader lab check {lab}`.")
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
                gpu_model=gpu_model,
            )
            typer.echo(
                f"Added lab {row.slug} ({row.title}) to {course}, max score {row.max_score:g}."
                + (f" Its timings belong to {row.gpu_model} GPUs." if row.gpu_model else "")
            )
    except DomainError as exc:
        raise _fail(exc.message) from None


def _lab_in(session: Session, course: str, lab: str) -> tuple[Course, Lab]:
    from app.courses.service import get_course, get_lab

    found = get_course(session, slug=course)
    return found, get_lab(session, course=found, slug=lab)


def _when_or_none(text: str | None) -> datetime | None | Keep:
    """An option's date: KEEP when not given, None for 'none' (clears it), else the date."""
    from app.courses.service import KEEP

    if text is None:
        return KEEP
    if text.strip().lower() in ("none", "never", ""):
        return None
    return _when(text)


@lab_cli.command("update")
def lab_update(
    course: str,
    lab: str,
    release: Annotated[
        str | None, typer.Option(help="opens at (UTC, ISO 8601); 'none': open at once")
    ] = None,
    due: Annotated[
        str | None, typer.Option(help="due at (UTC, ISO 8601); 'none': no due date")
    ] = None,
    late_policy: Annotated[
        str | None, typer.Option("--late-policy", help="after the due date: accept or refuse")
    ] = None,
    score_policy: Annotated[
        str | None, typer.Option("--score-policy", help="which submission counts: best or last")
    ] = None,
) -> None:
    """Re-read the lab's folder (checked first where it changed: points, title and version come
    from its lab.toml), and change the lab's dates and policies; late flags follow a new due
    date."""
    from app.core.database import session_scope
    from app.courses.models import LatePolicy, ScorePolicy
    from app.courses.service import reread_lab, update_lab

    try:
        late_value = LatePolicy(late_policy) if late_policy else None
        score_value = ScorePolicy(score_policy) if score_policy else None
    except ValueError:
        raise _fail(
            "--score-policy is best or last, and --late-policy is accept or refuse."
        ) from None
    try:
        with session_scope() as session:
            _, row = _lab_in(session, course, lab)
            changes = reread_lab(session, lab=row)
            changes += update_lab(
                session,
                lab=row,
                release_at=_when_or_none(release),
                due_at=_when_or_none(due),
                late_policy=late_value,
                score_policy=score_value,
            )
    except DomainError as exc:
        raise _fail(exc.message) from None
    if changes:
        typer.echo(f"{course}/{lab} now " + "; ".join(changes) + ".")
    else:
        typer.echo(f"{course}/{lab} already had these settings; nothing changed.")


@lab_cli.command("remove")
def lab_remove(course: str, lab: str) -> None:
    """Remove a lab: students no longer see it or submit to it, the gradebook leaves it out.
    Its submissions stay; `lab restore` brings it back."""
    from app.core.database import session_scope, utcnow
    from app.courses.service import archive_lab

    try:
        with session_scope() as session:
            _, row = _lab_in(session, course, lab)
            done = archive_lab(session, lab=row, now=utcnow())
    except DomainError as exc:
        raise _fail(exc.message) from None
    if done:
        typer.echo(
            f"Removed {lab} from {course}; its submissions are kept "
            f"(`kernelgrader lab restore {course} {lab}` brings it back)."
        )
    else:
        typer.echo(f"{lab} was already removed from {course}; nothing changed.")


@lab_cli.command("restore")
def lab_restore(course: str, lab: str) -> None:
    """Bring back a removed lab, with its submissions."""
    from app.core.database import session_scope
    from app.courses.service import restore_lab

    try:
        with session_scope() as session:
            _, row = _lab_in(session, course, lab)
            done = restore_lab(session, lab=row)
    except DomainError as exc:
        raise _fail(exc.message) from None
    typer.echo(
        f"Restored {lab} in {course}." if done else f"{lab} was not removed; nothing changed."
    )


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
    from app.courses.extensions import grant_extension
    from app.users.service import get_user

    due_at = _when(until)
    assert due_at is not None
    try:
        with session_scope() as session:
            found, row = _lab_in(session, course, lab)
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
        raise _fail(exc.message) from None
    typer.echo(f"{email} may submit {lab} until {due_at:%Y-%m-%d %H:%M} UTC.")


@extension_cli.command("revoke")
def extension_revoke(course: str, lab: str, email: str) -> None:
    """Take an extension back: the lab's own due date applies again."""
    from app.core.database import session_scope
    from app.courses.extensions import revoke_extension
    from app.users.service import get_user

    try:
        with session_scope() as session:
            _, row = _lab_in(session, course, lab)
            done = revoke_extension(session, lab=row, student=get_user(session, email=email))
    except DomainError as exc:
        raise _fail(exc.message) from None
    if not done:
        raise _fail(f"{email} has no extension for {lab}; nothing was changed.")
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
        raise _fail(exc.message) from None
    if not lines:
        typer.echo(f"{course} has no extensions.")
        return
    typer.echo("lab\tstudent\tuntil\tgranted by\tnote")
    for line in lines:
        typer.echo(line)


@cli.command()
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
            _, row = _lab_in(session, course, lab)
            result = regrade_lab(
                session, lab=row, requested_by="the CLI", now=utcnow(), counted_only=counted_only
            )
    except DomainError as exc:
        raise _fail(exc.message) from None
    skipped = f"; {result.skipped} already waiting or grading" if result.skipped else ""
    typer.echo(
        f"Queued {result.queued} submission{'s' if result.queued != 1 else ''} of {lab} for a "
        f"regrade{skipped}. Running workers send them a few at a time, behind new uploads."
        + (f" {result.versions()}" if result.versions() else "")
    )


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
            typer.echo(f"{user.email} is {_article(chosen.value)} {chosen.value} in {found.slug}.")
    except DomainError as exc:
        raise _fail(exc.message) from None


@roster_cli.command("import")
def roster_import(
    course: str,
    file: Path,
    invites: Annotated[
        Path | None,
        typer.Option(help="write a one-time password link for each user without a password"),
    ] = None,
    days: Annotated[float, typer.Option(help="how long the links work")] = 7,
) -> None:
    """Enrol everyone in a CSV file with columns email, name and (optional) role."""
    from app.core.database import session_scope, utcnow
    from app.courses.service import get_course, import_roster
    from app.users.invites import issue_invite

    try:
        text = file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(f"Could not read {file}: {exc}.") from None
    links = []
    try:
        with session_scope() as session:
            users = import_roster(session, course=get_course(session, slug=course), text=text)
            if invites is not None:
                now = utcnow()
                for user in users:
                    if user.password_hash is None:
                        links.append(issue_invite(session, user=user, now=now, days=days))
            if invites is not None:
                _write_invites(invites, links)
            typer.echo(f"Enrolled {len(users)} users in {course}.")
    except DomainError as exc:
        raise _fail(exc.message) from None
    if invites is not None:
        typer.echo(
            f"Wrote {len(links)} invite link{'s' if len(links) != 1 else ''} to {invites} "
            "(users who already had a password got none)."
        )


def _write_invites(path: Path, links: list[IssuedInvite]) -> None:
    import csv

    try:
        with path.open("w", encoding="utf-8", newline="") as out:
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(["email", "name", "link", "expires_at"])
            for link in links:
                writer.writerow(
                    [link.user.email, link.user.name, link.url, link.expires_at.isoformat()]
                )
    except OSError as exc:
        # Raised inside the transaction, so no link is stored that nobody could hand out.
        raise _fail(f"Could not write {path}: {exc}; no links were made.") from None


@user_cli.command("invite")
def user_invite(
    email: str,
    days: Annotated[float, typer.Option(help="how long the link works")] = 7,
) -> None:
    """Print a one-time link with which the user sets a password (also a reset link)."""
    from app.core.database import session_scope, utcnow
    from app.users.invites import issue_invite
    from app.users.service import get_user

    try:
        with session_scope() as session:
            issued = issue_invite(
                session, user=get_user(session, email=email), now=utcnow(), days=days
            )
    except DomainError as exc:
        raise _fail(exc.message) from None
    typer.echo(
        f"A link for {email} to set a password, usable once, until "
        f"{issued.expires_at:%Y-%m-%d %H:%M} UTC (earlier links stop working):"
    )
    typer.echo(issued.url)


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


@cli.command()
def status() -> None:
    """The workers (host, GPU, last heartbeat, the job each holds), the queue, the last errors."""
    from app.core.database import session_scope
    from app.core.settings import get_settings
    from app.fleet.service import fleet_snapshot
    from app.fleet.status_text import render_status

    try:
        with session_scope() as session:
            snapshot = fleet_snapshot(session)
    except SQLAlchemyError as exc:
        raise _fail(_database_trouble(exc)) from None
    timeout = get_settings().heartbeat_timeout_seconds
    typer.echo(render_status(snapshot, heartbeat_timeout=timeout), nl=False)


@cli.command()
def worker(
    gpus: Annotated[
        str | None,
        typer.Option(
            help="one worker process per GPU, supervised and restarted: 'all', or indices "
            "such as 0,1"
        ),
    ] = None,
    parent_pid: Annotated[int | None, typer.Option(hidden=True)] = None,
    loglevel: Annotated[str, typer.Option(help="Celery log level")] = "INFO",
) -> None:
    """Run a grading worker: compiles, and runs kernels where a GPU is (--gpus: one per GPU)."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if gpus is not None:
        from app.fleet.supervisor import SupervisorError, supervise

        try:
            raise typer.Exit(code=supervise(gpus, loglevel=loglevel))
        except SupervisorError as exc:
            raise _fail(str(exc)) from None
    from app.grading.gpu_probe import (
        cannot_compile_sentence,
        compile_unavailable_reason,
        run_unavailable_reason,
        worker_arch,
        worker_gpu_model,
    )

    if parent_pid is not None:
        from app.fleet.parent import watch_parent

        # The local worker of `serve`, or one of `worker --gpus`, stops when that process is
        # gone, even if it was killed.
        watch_parent(parent_pid)
    missing = compile_unavailable_reason()
    if missing is not None:
        raise _fail(cannot_compile_sentence(missing))
    from app.core.settings import get_settings
    from app.fleet.presence import Presence, announce
    from app.grading.celery_app import QUEUE, celery_app
    from app.grading.engine import prepare_engine
    from app.grading.routing import gpu_queues
    from app.grading.sandbox_cleanup import reap_orphaned_sandboxes
    from app.grading.sweeper import SweeperThread
    from app.grading.worker import worker_id

    settings = get_settings()
    # Before this worker starts children of its own: what killed workers left, processes
    # (which may hold the GPU) and then their folders.
    reaped = reap_orphaned_sandboxes()
    if reaped.killed:
        typer.echo(
            f"Stopped {len(reaped.killed)} processes that workers which were killed left "
            "running (the log names them)."
        )
    if reaped.removed:
        typer.echo(
            f"Removed {len(reaped.removed)} sandbox folders left by workers that were killed."
        )
    reason = run_unavailable_reason()
    model = worker_gpu_model()
    queues = [QUEUE] if reason else [QUEUE, *gpu_queues(model)]
    if reason:
        typer.echo(f"This worker compiles only: {reason}")
    else:
        where = os.environ.get("CUDA_VISIBLE_DEVICES")
        typer.echo(
            f"This worker compiles and runs kernels on {model or 'the GPU'}"
            + (f" (CUDA_VISIBLE_DEVICES={where})." if where else ".")
        )
    presence: Presence | None = None

    def stop_on_signal(signum: int, _frame: object) -> None:
        # Until Celery installs its own handler, SIGTERM (a supervisor stopping, `docker
        # stop`) ends a worker that is still starting, and the registry hears that it stopped.
        # Not by raising SystemExit here: landing in an import's clean-up callback (the
        # startup imports a lot), it is printed and ignored, and the worker starts anyway.
        def stop() -> None:
            if presence is not None:
                presence.close()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(128 + signum)

        threading.Thread(target=stop, name="kernelgrader-stop", daemon=True).start()

    signal.signal(signal.SIGTERM, stop_on_signal)
    try:
        try:
            presence = announce(
                name=worker_id(),
                gpu_model=model,
                arch=worker_arch(),
                can_run=reason is None,
                note=reason or "",
                queues=queues,
            )
        except SQLAlchemyError as exc:
            raise _fail(_database_trouble(exc)) from None
        prepare_engine(settings, gpu=reason is None)
        SweeperThread(has_gpu=reason is None, gpu_model=model).start()
        celery_app.worker_main(
            [
                "worker",
                # Threads: jobs share this process's warm children and caches; their
                # correctness runs share the GPU, and the per-GPU lock keeps each timed
                # section alone.
                "--pool=threads",
                f"--concurrency={settings.worker_concurrency}",
                f"--loglevel={loglevel}",
                f"--queues={','.join(queues)}",
                f"--hostname=kernelgrader-{os.getpid()}@%h",
                "--without-gossip",
                "--without-mingle",
            ]
        )
    finally:
        if presence is not None:
            presence.close()


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
        from app.grading.gpu_probe import CUDA_EXTRA, compile_unavailable_reason

        missing = compile_unavailable_reason()
        if missing is not None:
            typer.secho(
                f"No local worker was started, since it could not compile kernels ({missing}): "
                "the web side runs alone and submissions wait in the queue until a worker "
                f"starts; {CUDA_EXTRA}, then restart serve or start `kernelgrader worker`.",
                fg=typer.colors.YELLOW,
            )
        else:
            # A separate process: the worker may load CUDA, which must stay out of the web
            # server.
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
