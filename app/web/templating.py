"""Jinja2 templates, Markdown for lab pages, and CSRF tokens for every form."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from markdown_it import MarkdownIt
from markupsafe import Markup, escape

from app.core.errors import Forbidden
from app.core.security import csrf_tokens_match, new_csrf_token
from app.core.timefmt import when_text

templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))

# Raw HTML in a lab page is escaped, not passed through: lab folders can come from anyone.
_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def markdown(text: str) -> Markup:
    return Markup(_markdown.render(text))


def when(value: datetime | str | None) -> str:
    return when_text(value)


_LOG_LINE = re.compile(r"\((\d+)\)\s*:\s*(error|warning)", re.IGNORECASE)


def log_lines(log: str) -> list[tuple[str, int | None]]:
    """Each compile-log line with the source line it points at, if any, for links."""
    out = []
    for line in log.splitlines():
        match = _LOG_LINE.search(line)
        out.append((line, int(match.group(1)) if match else None))
    return out


def flagged_lines(log: str) -> set[int]:
    return {number for _, number in log_lines(log) if number is not None}


_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def staff_text(text: str) -> Markup:
    """A staff note as it is written (a command in `backticks`), with the commands set as code
    and /admin/system as a link; everything else escaped."""
    out = []
    for i, part in enumerate(_CODE_SPAN.split(text)):
        escaped = str(escape(part))
        if i % 2:
            out.append(f"<code>{escaped}</code>")
        else:
            out.append(
                escaped.replace("/admin/system", '<a href="/admin/system">/admin/system</a>')
            )
    return Markup("".join(out))


def number(value: float | None, digits: int = 3) -> str:
    """A measured value with `digits` significant digits, without an exponent for everyday
    sizes: 1234.5 -> '1235', 0.01234 -> '0.0123'."""
    if value is None:
        return "—"
    if value == 0:
        return "0"
    text = f"{value:.{digits}g}"
    if "e" in text:
        magnitude = abs(value)
        text = f"{value:.0f}" if magnitude >= 1 else f"{value:.{digits + 2}f}".rstrip("0")
    return text


def points(value: float | None) -> str:
    """A score as people write it: 99.1608 -> '99.16', 40.0 -> '40'."""
    return "—" if value is None else f"{round(value, 2):g}"


templates.env.filters["markdown"] = markdown
templates.env.filters["points"] = points
templates.env.filters["when"] = when
templates.env.filters["staff_text"] = staff_text
templates.env.filters["number"] = number
templates.env.globals["log_lines"] = log_lines
templates.env.globals["flagged_lines"] = flagged_lines


def csrf_token(request: Request) -> str:
    token = request.session.get("csrf")
    if not isinstance(token, str):
        token = new_csrf_token()
        request.session["csrf"] = token
    return token


def check_csrf(request: Request, given: str | None) -> None:
    if not csrf_tokens_match(request.session.get("csrf"), given):
        raise Forbidden(
            "The form expired or did not come from this site; reload the page and try again."
        )


def render(
    request: Request, name: str, context: dict[str, Any], *, status_code: int = 200
) -> HTMLResponse:
    context = {"csrf_token": csrf_token(request), **context}
    context.setdefault("user", getattr(request.state, "viewer", None))
    context.setdefault("form", None)  # a refused form (app.web.forms.PostedForm), for its macros
    return templates.TemplateResponse(request, name, context, status_code=status_code)
