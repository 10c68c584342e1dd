"""What the forms of every feature's pages share: reading their fields, collecting every error
found on them, and answering them.

A page reads a posted form into a `PostedForm` (`await posted(request)`), reads each field through
`form.read` (a parser that raises a DomainError leaves its sentence beside the field and reads
on), runs its service through `form.attempt` only while the form is still whole, and, where
anything was refused, answers with `form.refused(...)`: the work rolled back and the page shown
again with what was typed and every error beside its field, under the refusal's status. The
templates show them through the macros `problems`, `invalid`, `field_error` and `typed` of
`_macros.html`; a field's errors are keyed by the id of its input on the page.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from sqlalchemy.orm import Session

from app.core.errors import DomainError, Invalid
from app.web.templating import render

T = TypeVar("T")

# Never typed back into a page: a password is entered again, a token is the page's own.
_NOT_SHOWN_AGAIN = frozenset({"csrf_token", "password", "current", "confirm"})


class PostedForm:
    """One posted form: the text typed in each field, and every error found on it.

    `prefix` tells apart two forms of one page that share field names (say "adjust-" and
    "budget-"): values and errors are kept under the field's id, prefix and name."""

    def __init__(self, values: Mapping[str, Any] | None = None, *, prefix: str = "") -> None:
        self.prefix = prefix
        self.values = {
            prefix + name: value
            for name, value in (values or {}).items()
            if isinstance(value, str) and name not in _NOT_SHOWN_AGAIN
        }
        self.errors: dict[str, str] = {}
        self.status_code = Invalid.status_code

    @property
    def ok(self) -> bool:
        return not self.errors

    def failed(self, name: str) -> bool:
        return self.prefix + name in self.errors

    def text(self, name: str) -> str:
        return str(self.values.get(self.prefix + name, ""))

    def refuse(self, field: str, message: str, *, status_code: int = Invalid.status_code) -> None:
        """Record a sentence about a field ("" for the form as a whole); the first one a field
        gets is kept, and the first refusal's status is the page's."""
        if not self.errors:
            self.status_code = status_code
        key = self.prefix + field if field else ""
        self.errors.setdefault(key, message)

    def refuse_all(self, problems: Mapping[str, str]) -> None:
        """A sentence per field, as a service's `*_problems` check lists them."""
        for field, message in problems.items():
            self.refuse(field, message)

    def take(self, exc: DomainError, *, field: str = "", fields: Mapping[str, str] = {}) -> None:
        """A service's refusal, beside the field it names (a keyword argument, renamed through
        `fields` where the form calls it otherwise), else `field`."""
        named = fields.get(exc.field, exc.field) if exc.field else ""
        self.refuse(named or field, exc.message, status_code=exc.status_code)

    def read(self, name: str, parse: Callable[[str], T]) -> T | None:
        """The field parsed; None, with the parser's sentence beside the field, if it refused."""
        try:
            return parse(self.text(name))
        except DomainError as exc:
            self.take(exc, field=name)
            return None

    def attempt(
        self, work: Callable[[], T], *, field: str = "", fields: Mapping[str, str] = {}
    ) -> T | None:
        """Run a service call; None, with its sentence kept, if it refused."""
        try:
            return work()
        except DomainError as exc:
            self.take(exc, field=field, fields=fields)
            return None

    def refused(
        self,
        request: Request,
        session: Session | None,
        template: str,
        context: Callable[[], dict[str, Any]],
    ) -> HTMLResponse:
        """The page again, its work rolled back, with what was typed and every error."""
        if session is not None:
            session.rollback()
        page = context()
        page["form"] = self
        # A template that shows only `error` (not yet through the macros) still says why.
        page["error"] = next(iter(self.errors.values()), None)
        return render(request, template, page, status_code=self.status_code)


async def posted(request: Request, *, prefix: str = "") -> PostedForm:
    return PostedForm(await request.form(), prefix=prefix)


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


def a_number(text: str, what: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise Invalid(f"{what} must be a number, not {text.strip()!r}.") from None


def refused(
    request: Request,
    session: Session,
    exc: DomainError,
    template: str,
    context: Callable[[], dict[str, Any]],
) -> HTMLResponse:
    """A form the service refused with one error, its page shown again (through `PostedForm`,
    without the typed values: a page that wants them reads its form with `posted`)."""
    form = PostedForm()
    form.take(exc, field=exc.field)
    return form.refused(request, session, template, context)
