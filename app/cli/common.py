"""What the command groups share: failing in a sentence, dates, finding a course's lab."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from app.courses.models import Course, Lab


def fail(message: str) -> typer.Exit:
    typer.secho(message, err=True, fg=typer.colors.RED)
    return typer.Exit(code=1)


def when(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise fail(f"'{text}' is not a date; write it like 2026-12-01T23:59 (UTC).") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def lab_in(session: Session, course: str, lab: str) -> tuple[Course, Lab]:
    from app.courses.service import get_course, get_lab

    found = get_course(session, slug=course)
    return found, get_lab(session, course=found, slug=lab)
