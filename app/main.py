"""The FastAPI application: pages, the API, sessions and one place that maps errors to HTTP."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.middleware.sessions import SessionMiddleware

from app import __version__
from app.api.routes import router as api_router
from app.api.tokens import router as tokens_router
from app.core.errors import DomainError, NotAuthenticated, RateLimited
from app.core.http_security import SecurityHeadersMiddleware
from app.core.limits import FORM_OVERHEAD_BYTES, BodySizeLimit
from app.core.settings import get_settings
from app.core.throttle import FailureThrottle
from app.web.routes import router as web_router
from app.web.templating import render


def create_app() -> FastAPI:
    settings = get_settings()
    app = FastAPI(
        title="kernelgrader",
        version=__version__,
        description="A CUDA kernel autograder: submit a kernel, read its verdicts and scores.",
    )
    app.add_middleware(
        BodySizeLimit, max_body_bytes=settings.max_upload_bytes + FORM_OVERHEAD_BYTES
    )
    app.add_middleware(
        SessionMiddleware,
        secret_key=settings.secret_key,
        session_cookie="kernelgrader_session",
        max_age=settings.session_max_age_seconds,
        same_site="lax",
        https_only=settings.env == "production",
    )
    # Outside the session middleware, so it sees (and marks Secure over HTTPS) its cookie.
    app.add_middleware(SecurityHeadersMiddleware)
    app.state.login_throttle = FailureThrottle(
        max_failures=settings.login_max_failures, window_seconds=settings.login_window_seconds
    )
    app.state.login_address_throttle = FailureThrottle(
        max_failures=settings.login_max_failures * 5, window_seconds=settings.login_window_seconds
    )

    @app.exception_handler(DomainError)
    async def domain_error(request: Request, exc: DomainError) -> Response:
        headers: dict[str, str] | None = None
        if isinstance(exc, RateLimited):
            headers = {"Retry-After": str(exc.retry_after), "X-RateLimit-Remaining": "0"}
        if request.url.path.startswith("/api/"):
            if isinstance(exc, NotAuthenticated):
                headers = {"WWW-Authenticate": "Bearer"}
            return JSONResponse(
                {"detail": exc.message}, status_code=exc.status_code, headers=headers
            )
        if isinstance(exc, NotAuthenticated):
            return RedirectResponse(f"/login?next={request.url.path}", status_code=303)
        page = render(request, "error.html", {"message": exc.message}, status_code=exc.status_code)
        page.headers.update(headers or {})
        return page

    app.include_router(api_router)
    app.include_router(tokens_router)
    app.include_router(web_router)
    return app
