"""Refuse request bodies far over the upload limit before they are read or spooled to disk.

A refused body is never read: the answer names its size where the client declared one
(Content-Length), and the limit. Where a page stands for the refused form (the lab page for its
upload form: `reroute`), that page is rendered in place of a bare error page, with the sentence
in it, as a file refused after it was read is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Builds the refusal: JSON under /api/, the error page elsewhere (app.main's _plain_error).
Responder = Callable[[Request, int, str, Mapping[str, str]], Response]
# The page that stands for a refused form, as a request for it (a GET), or None for none; the
# page reads the sentence from the request's state (`REFUSED_UPLOAD`) and answers 413.
Reroute = Callable[[Scope], Scope | None]
REFUSED_UPLOAD = "refused_upload"

# Room for the multipart framing and the form's other fields around the file itself.
FORM_OVERHEAD_BYTES = 64 * 1024


def size_words(size: int) -> str:
    """A byte count as people read it: KiB below a MiB, MiB with a decimal above."""
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


def too_large_sentence(*, limit: int, size: int | None = None) -> str:
    """What a request whose body passes the limit is told (the body itself unread)."""
    told = (
        f"The upload is {size} bytes ({size_words(size)})"
        if size is not None
        else "The upload is larger than that"
    )
    return (
        f"{told}, over the limit of {limit} bytes ({size_words(limit)}) for one .cu file; "
        "submit only the kernel's source file."
    )


class BodySizeLimit:
    """Answers 413 when Content-Length, or the bytes actually received, pass the limit."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        max_upload_bytes: int,
        respond: Responder,
        reroute: Reroute | None = None,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_upload_bytes = max_upload_bytes
        self.respond = respond
        self.reroute = reroute

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._refuse(scope, receive, send, size=int(declared))
            return
        received = 0
        started = False
        refused = False

        async def counting_receive() -> Message:
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes and not started:
                    # A body without Content-Length (chunked) grew too big: answer now, and
                    # tell the app the client went away so it stops reading.
                    refused = True
                    await self._refuse(scope, receive, send)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refused:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not refused:
                raise

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, size: int | None = None
    ) -> None:
        # A body without Content-Length is refused part-read: its size is not known, only that
        # it passes the limit.
        message = too_large_sentence(limit=self.max_upload_bytes, size=size)
        page = self.reroute(scope) if self.reroute is not None else None
        if page is None:
            response = self.respond(Request(scope), 413, message, {"Connection": "close"})
            await response(scope, receive, send)
            return
        page["state"] = {**scope.get("state", {}), REFUSED_UPLOAD: message}

        async def no_body() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def closing(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {
                    **message,
                    "headers": [*message.get("headers", []), (b"connection", b"close")],
                }
            await send(message)

        await self.app(page, no_body, closing)
