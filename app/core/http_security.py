"""Response headers that make the browser a second line of defence, and Secure cookies on HTTPS.

Escaping in the templates is the first line against script injection; these headers limit what
a slip could do (no framing, no MIME sniffing, scripts and forms only from this site). The
session cookie is HttpOnly and SameSite=Lax from the session middleware; here it also gets
`Secure` whenever the request came over HTTPS (directly, or through a proxy that uvicorn's
`--proxy-headers` trusts), so a cookie set over HTTPS is never sent back over plain HTTP.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# The pages carry one small inline script (the status poll), hence 'unsafe-inline' for scripts;
# everything else is held to this site, /docs included (Swagger UI is served by the app).
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)


class SecurityHeadersMiddleware:
    """Pure ASGI middleware: adds the headers above to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        https = scope.get("scheme") == "https"

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("X-Frame-Options", "DENY")
                headers.setdefault("Referrer-Policy", "same-origin")
                headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
                if https:
                    headers.setdefault("Strict-Transport-Security", "max-age=31536000")
                    _secure_cookies(headers)
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _secure_cookies(headers: MutableHeaders) -> None:
    cookies = headers.getlist("set-cookie")
    if not cookies:
        return
    del headers["set-cookie"]
    for cookie in cookies:
        attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
        headers.append("set-cookie", cookie if "secure" in attributes else cookie + "; Secure")
