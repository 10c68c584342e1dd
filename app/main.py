"""The FastAPI application: pages, the API, sessions and one place that maps errors to HTTP."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.middleware.sessions import SessionMiddleware

from app import __version__
from app.api.routes import router as api_router
from app.core.errors import DomainError, NotAuthenticated
from app.core.settings import get_settings
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
        SessionMiddleware,
        secret_key=settings.secret_key,
        session_cookie="kernelgrader_session",
        max_age=settings.session_max_age_seconds,
        same_site="lax",
        https_only=settings.env == "production",
    )

    @app.exception_handler(DomainError)
    async def domain_error(request: Request, exc: DomainError) -> Response:
        if request.url.path.startswith("/api/"):
            headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, NotAuthenticated) else None
            return JSONResponse(
                {"detail": exc.message}, status_code=exc.status_code, headers=headers
            )
        if isinstance(exc, NotAuthenticated):
            return RedirectResponse(f"/login?next={request.url.path}", status_code=303)
        return render(request, "error.html", {"message": exc.message}, status_code=exc.status_code)

    app.include_router(api_router)
    app.include_router(web_router)
    return app
