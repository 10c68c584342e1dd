"""Refuse request bodies far over the upload limit before they are read or spooled to disk."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Builds the refusal: JSON under /api/, the error page elsewhere (app.main's _plain_error).
Responder = Callable[[Request, int, str, Mapping[str, str]], Response]

# Room for the multipart framing and the form's other fields around the file itself.
FORM_OVERHEAD_BYTES = 64 * 1024


class BodySizeLimit:
    """Answers 413 when Content-Length, or the bytes actually received, pass the limit."""

    def __init__(
        self, app: ASGIApp, *, max_body_bytes: int, max_upload_bytes: int, respond: Responder
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_upload_bytes = max_upload_bytes
        self.respond = respond

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._refuse(scope, receive, send)
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

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.max_upload_bytes
        # The size of a body refused unread is not known, only that it passes the limit.
        message = (
            f"The upload is larger than the limit of {limit} bytes ({limit / 1024:.0f} KiB); "
            "submit only the kernel's .cu source file."
        )
        response = self.respond(Request(scope), 413, message, {"Connection": "close"})
        await response(scope, receive, send)
