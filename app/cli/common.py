"""What the command groups share: failing in a sentence, dates, finding a course's lab."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from app.courses.models import Course, Lab


# How long a command that queued a job waits, before it ends, for this process's sender to hand
# it to the broker (a job the broker refuses is taken back, and the workers' sweep sends it).
SEND_SECONDS = 30.0


def fail(message: str) -> typer.Exit:
    typer.secho(message, err=True, fg=typer.colors.RED)
    return typer.Exit(code=1)


def require_database() -> None:
    """Refuse, in a sentence, to open a SQLite database that does not exist: opening it would
    make a new, empty one beside the one `serve` uses (a command run with other settings)."""
    from app.core.settings import get_settings

    settings = get_settings()
    path = settings.sqlite_file()
    if path is None or path.exists():
        return
    raise fail(
        f"There is no kernelgrader database at {path}, and this command would start a new, empty "
        f"one there. `kernelgrader serve` creates the database in its data folder "
        f"(KERNELGRADER_DATA_DIR, here {settings.data_dir.resolve()}): give this command the "
        "same KERNELGRADER_DATA_DIR or KERNELGRADER_DATABASE_URL as serve (or run it where serve "
        "reads the same .env), or start serve first. `kernelgrader db upgrade` makes an empty "
        "database on purpose."
    )


def when(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise fail(f"'{text}' is not a date; write it like 2026-12-01T23:59 (UTC).") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def lab_in(session: Session, course: str, lab: str) -> tuple[Course, Lab]:
    from app.courses.service import find_lab

    return find_lab(session, course=course, lab=lab)
