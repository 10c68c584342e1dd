"""What the forms of every feature's pages share: reading their fields, and answering them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from sqlalchemy.orm import Session

from app.core.errors import DomainError, Invalid
from app.web.templating import render


def back_to(url: str, message: str) -> RedirectResponse:
    return RedirectResponse(f"{url}?message={quote(message)}", status_code=303)


def form_flag(value: str | None) -> bool | None:
    return {"true": True, "false": False}.get(value or "")


def form_time(value: str, what: str) -> datetime | None:
    """A datetime-local field, read as UTC; empty is None."""
    if not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise Invalid(f"{what} '{value}' is not a date and time; pick one.") from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def whole_number(text: str, what: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise Invalid(f"{what} must be a whole number, not {text.strip()!r}.") from None


def refused(
    request: Request,
    session: Session,
    exc: DomainError,
    template: str,
    context: Callable[[], dict[str, Any]],
) -> HTMLResponse:
    """A form the service refused: its work rolled back, and its page shown again with the
    sentence that says why, under the refusal's status."""
    session.rollback()
    page = context()
    page["error"] = exc.message
    return render(request, template, page, status_code=exc.status_code)
