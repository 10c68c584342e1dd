"""`kernelgrader course` and `kernelgrader lab`: courses, and the labs in them."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from app.cli.common import fail, lab_in, require_database, when
from app.core.errors import DomainError

if TYPE_CHECKING:
    from app.courses.service import Keep

course_cli = typer.Typer(help="Courses.", no_args_is_help=True)
lab_cli = typer.Typer(help="Labs in a course.", no_args_is_help=True)


@lab_cli.callback()
def _labs_need_the_database(ctx: typer.Context) -> None:
    # `lab check` reads a lab folder only; every other lab command reads the database.
    if ctx.invoked_subcommand != "check":
        require_database()


@course_cli.command("create")
def course_create(
    slug: str,
    title: Annotated[str, typer.Option(help="the course's full name")] = "",
    instructor: Annotated[
        str | None,
        typer.Option(help="the email of an account that becomes the course's instructor"),
    ] = None,
) -> None:
    """Create a course (with its instructor, who can then open it in the web)."""
    from app.core.database import session_scope
    from app.courses.lifecycle import create_course_for
    from app.courses.service import create_course
    from app.users.service import get_user

    try:
        with session_scope() as session:
            if instructor:
                teacher = get_user(session, email=instructor)
                course = create_course_for(
                    session, slug=slug, title=title or slug, instructor=teacher
                )
            else:
                course = create_course(session, slug=slug, title=title or slug)
            typer.echo(f"Created course {course.slug}: {course.title}")
            if instructor:
                typer.echo(f"{teacher.email} is its instructor.")
            else:
                typer.echo(
                    "It has no instructor yet: `kernelgrader user add EMAIL --role instructor "
                    f"--course {course.slug}` makes one (or pass --instructor EMAIL)."
                )
    except DomainError as exc:
        raise fail(exc.message) from None


@course_cli.command("list")
def course_list() -> None:
    """Every course, with its instructors; archived ones marked."""
    from sqlalchemy import select

    from app.core.database import session_scope
    from app.core.timefmt import when_text
    from app.courses.models import Course, Enrollment, Role
    from app.users.models import User

    with session_scope() as session:
        for course in session.scalars(select(Course).order_by(Course.slug)):
            teachers = session.scalars(
                select(User.email)
                .join(Enrollment, Enrollment.user_id == User.id)
                .where(
                    Enrollment.course_id == course.id,
                    Enrollment.role == Role.instructor.value,
                )
                .order_by(User.email)
            ).all()
            archived = f" (archived {when_text(course.archived_at)})" if course.archived_at else ""
            who = ", ".join(teachers) or "no instructor"
            typer.echo(f"{course.slug}: {course.title}{archived}; {who}")


@course_cli.command("archive")
def course_archive(slug: str) -> None:
    """Archive a course: gone from everyone's list of courses, closed for uploads; everything
    in it is kept, and `course restore` brings it back."""
    from app.core.database import session_scope, utcnow
    from app.courses.lifecycle import archive_course
    from app.courses.service import get_course

    try:
        with session_scope() as session:
            done = archive_course(session, course=get_course(session, slug=slug), now=utcnow())
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(
        f"Archived {slug}: it is gone from everyone's list of courses and takes no uploads; "
        f"everything in it is kept (`kernelgrader course restore {slug}` brings it back)."
        if done
        else f"{slug} was archived already; nothing changed."
    )


@course_cli.command("restore")
def course_restore(slug: str) -> None:
    """Bring back an archived course, as it was."""
    from app.core.database import session_scope
    from app.courses.lifecycle import restore_course
    from app.courses.service import get_course

    try:
        with session_scope() as session:
            done = restore_course(session, course=get_course(session, slug=slug))
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(f"Restored {slug}." if done else f"{slug} was not archived; nothing changed.")


@course_cli.command("copy")
def course_copy(
    source: Annotated[str, typer.Argument(help="the course to copy")],
    slug: Annotated[str, typer.Argument(help="the new course's slug")],
    instructor: Annotated[
        str, typer.Option(help="the email of an account that becomes the new course's instructor")
    ],
    title: Annotated[str, typer.Option(help="the new course's full name")] = "",
) -> None:
    """Copy a course to a new term: its labs with their settings and policies, rubric items,
    late-day and regrade policies; no people, submissions, grades or dates."""
    from app.catalog.service import copy_course
    from app.core.database import session_scope
    from app.courses.service import get_course
    from app.users.service import get_user

    try:
        with session_scope() as session:
            old = get_course(session, slug=source)
            done = copy_course(
                session,
                source=old,
                slug=slug,
                title=title or slug,
                instructor=get_user(session, email=instructor),
            )
            typer.echo(
                f"Copied {source} to {done.course.slug}: {done.labs} labs, "
                f"{done.rubric_items} rubric items. Set each lab's dates with `kernelgrader "
                f"lab update {done.course.slug} LAB --release ... --due ...`."
            )
    except DomainError as exc:
        raise fail(exc.message) from None


def _check_lab_folder(
    folder: Path, *, run: bool, arch: str | None, quiet: bool, profile: bool = True
) -> bool:
    """Print what `graders.labcheck` finds (all of it, or only problems when quiet)."""
    from app.core.settings import get_settings
    from graders.labcheck import CheckItem, check_lab

    def show(item: CheckItem) -> None:
        if quiet and item.status in ("ok", "skip"):
            return
        color = {"fail": typer.colors.RED, "warn": typer.colors.YELLOW}.get(item.status)
        typer.secho(f"  {item.status:<4}  {item.subject}: {item.message}", fg=color)

    settings = get_settings()
    report = check_lab(
        folder,
        run=run,
        secret=settings.grading_secret,
        arch=arch,
        progress=show,
        profile=profile,
        engine=settings.engine(),
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
    profile: Annotated[
        bool,
        typer.Option(help="on a GPU with Nsight Compute, check the slow kernels' findings"),
    ] = True,
) -> None:
    """Check a lab folder: spec, oracle, references, faulty and slow kernels (and on a GPU,
    verdicts and profiler findings)."""
    if not folder.is_dir():
        raise fail(f"{folder} is not a folder; give the lab's folder, the one holding lab.toml.")
    typer.echo(f"Checking the lab folder {folder}:")
    if not _check_lab_folder(folder, run=gpu, arch=arch, quiet=False, profile=profile):
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
        raise fail("--policy is best or last, and --late is accept or refuse.") from None
    # A lab folder is checked (without running kernels) before students can meet it; the
    # built-in labs are checked by the test suite.
    if Path(lab).is_dir() and not _check_lab_folder(Path(lab), run=False, arch=None, quiet=True):
        raise fail(f"The lab was not added; check it with `kernelgrader lab check {lab}`.")
    try:
        with session_scope() as session:
            row = add_lab(
                session,
                course=get_course(session, slug=course),
                ref=lab,
                release_at=when(release),
                due_at=when(due),
                score_policy=score_policy,
                late_policy=late_policy,
                gpu_model=gpu_model,
            )
            typer.echo(
                f"Added lab {row.slug} ({row.title}) to {course}, max score {row.max_score:g}."
                + (f" Its timings belong to {row.gpu_model} GPUs." if row.gpu_model else "")
            )
    except DomainError as exc:
        raise fail(exc.message) from None


def _when_or_none(text: str | None) -> datetime | None | Keep:
    """An option's date: KEEP when not given, None for 'none' (clears it), else the date."""
    from app.courses.service import KEEP

    if text is None:
        return KEEP
    if text.strip().lower() in ("none", "never", ""):
        return None
    return when(text)


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
    team_size: Annotated[
        int | None, typer.Option(help="most students in one team (1: everyone alone)")
    ] = None,
    late_day_cap: Annotated[
        str | None,
        typer.Option(help="most late days a student may spend on it; 'none': the course's cap"),
    ] = None,
    late_penalty: Annotated[
        float | None, typer.Option(help="percent of the score lost per late day not covered")
    ] = None,
    release_grades: Annotated[
        str | None,
        typer.Option(
            help="when students see hidden details and rubric points (UTC, ISO 8601; 'now'; "
            "'default': the due date plus the late-day cap)"
        ),
    ] = None,
) -> None:
    """Re-read the lab's folder (checked first where it changed: points, title and version come
    from its lab.toml), and change the lab's dates and policies; late flags follow a new due
    date."""
    from app.core.database import session_scope, utcnow
    from app.courses.models import LatePolicy, ScorePolicy
    from app.courses.service import reread_lab
    from app.policy.rules import update_lab, update_lab_policies

    try:
        late_value = LatePolicy(late_policy) if late_policy else None
        score_value = ScorePolicy(score_policy) if score_policy else None
    except ValueError:
        raise fail(
            "--score-policy is best or last, and --late-policy is accept or refuse."
        ) from None
    try:
        with session_scope() as session:
            _, row = lab_in(session, course, lab)
            changes = reread_lab(session, lab=row)
            changes += update_lab(
                session,
                lab=row,
                release_at=_when_or_none(release),
                due_at=_when_or_none(due),
                late_policy=late_value,
                score_policy=score_value,
            )
            changes += update_lab_policies(
                session,
                lab=row,
                now=utcnow(),
                team_size=team_size,
                late_day_cap=_cap(late_day_cap),
                late_penalty=late_penalty,
                grades_released_at=_release(release_grades),
            )
    except DomainError as exc:
        raise fail(exc.message) from None
    if changes:
        typer.echo(f"{course}/{lab} now " + "; ".join(changes) + ".")
    else:
        typer.echo(f"{course}/{lab} already had these settings; nothing changed.")


def _cap(text: str | None) -> int | None | Keep:
    from app.courses.service import KEEP

    if text is None:
        return KEEP
    if text.strip().lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise fail(f"--late-day-cap is a number of days or 'none', not {text!r}.") from None


def _release(text: str | None) -> datetime | None | Keep:
    from app.core.database import utcnow
    from app.courses.service import KEEP

    if text is None:
        return KEEP
    if text.strip().lower() == "default":
        return None
    if text.strip().lower() == "now":
        return utcnow()
    return when(text)


@lab_cli.command("remove")
def lab_remove(course: str, lab: str) -> None:
    """Remove a lab: students no longer see it or submit to it, the gradebook leaves it out.
    Its submissions stay; `lab restore` brings it back."""
    from app.core.database import session_scope, utcnow
    from app.courses.service import archive_lab

    try:
        with session_scope() as session:
            _, row = lab_in(session, course, lab)
            done = archive_lab(session, lab=row, now=utcnow())
    except DomainError as exc:
        raise fail(exc.message) from None
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
            _, row = lab_in(session, course, lab)
            done = restore_lab(session, lab=row)
    except DomainError as exc:
        raise fail(exc.message) from None
    typer.echo(
        f"Restored {lab} in {course}." if done else f"{lab} was not removed; nothing changed."
    )
