"""The one way a time is written for people, on every page and in every message: UTC, to the
minute, "2026-12-01 23:59 UTC" (the API sends ISO 8601 instead, for programs)."""

from __future__ import annotations

from datetime import UTC, datetime

WHEN_FORMAT = "%Y-%m-%d %H:%M UTC"


def when_text(value: datetime | str | None, none: str = "—") -> str:
    """A time as people read it here; an ISO 8601 string (a time kept in a JSON report) too."""
    if value is None or value == "":
        return none
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return value
        return when_text(parsed, none)
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return value.strftime(WHEN_FORMAT)
