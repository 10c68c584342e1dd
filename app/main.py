"""The FastAPI application: pages, the API, sessions and one place that maps errors to HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import Any
from urllib.parse import quote, urlsplit

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from sqlalchemy.exc import DataError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.sessions import SessionMiddleware

from app import __version__
from app.api.docs import add_offline_docs
from app.auth import api as auth_api
from app.auth import pages as auth_pages
from app.auth.pages import MISSING, installed
from app.catalog import pages as catalog_pages
from app.core.errors import DomainError, NotAuthenticated, NotFound, RateLimited, ServerBusy
from app.core.http_security import SecurityHeadersMiddleware
from app.core.limits import FORM_OVERHEAD_BYTES, BodySizeLimit
from app.core.overload import (
    DATABASE_AWAY,
    CommitUnconfirmed,
    InFlightLimit,
    database_unavailable,
)
from app.core.settings import get_settings
from app.core.throttle import FailureThrottle
from app.fleet import api as fleet_api
from app.fleet import pages as fleet_pages
from app.gradebook import api as gradebook_api
from app.gradebook import pages as gradebook_pages
from app.grading import api as grading_api
from app.grading import pages as grading_pages
from app.jobs.sender import job_sender
from app.lti.scores import follow_rubric
from app.people import pages as courses_pages
from app.performance import api as performance_api
from app.performance import pages as performance_pages
from app.policy import api as policy_api
from app.policy import pages as policy_pages
from app.profiling import api as profiling_api
from app.profiling import pages as profiling_pages
from app.regrades import api as regrades_api
from app.regrades import pages as regrades_pages
from app.rubric import api as rubric_api
from app.rubric import pages as rubric_pages
from app.similarity import api as similarity_api
from app.similarity import pages as similarity_pages
from app.submissions import api as submissions_api
from app.submissions import pages as submissions_pages
from app.teams import api as teams_api
from app.teams import pages as teams_pages
from app.web import static as web_static
from app.web.templating import render, templates

INTERNAL_ERROR = (
    "Something went wrong on our side, not because of what you sent; try again in a minute, "
    "and tell the course staff if it keeps happening."
)

# Reset links mailed to one address within KERNELGRADER_LOGIN_WINDOW_SECONDS.
RESETS_PER_ACCOUNT = 3

UNSTORABLE = (
    "The request holds a value that cannot be stored (a NUL character, or text longer than the "
    "field allows); correct it and send it again."
)


# At shutdown, how long jobs handed to the sender a moment ago have to reach the broker; any
# still held after it keep their stamps, and the workers' sweep finds them.
SEND_AT_SHUTDOWN_SECONDS = 5.0


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    yield
    await asyncio.to_thread(job_sender.wait_sent, SEND_AT_SHUTDOWN_SECONDS)


def create_app() -> FastAPI:
    settings = get_settings()
    follow_rubric()  # rubric changes reach the LMS's columns
    app = FastAPI(
        lifespan=_lifespan,
        title="kernelgrader",
        version=__version__,
        description="A CUDA kernel autograder: submit a kernel, read its verdicts and scores.",
        docs_url=None,
        redoc_url=None,
    )
    app.add_middleware(
        BodySizeLimit,
        max_body_bytes=settings.max_upload_bytes + FORM_OVERHEAD_BYTES,
        max_upload_bytes=settings.max_upload_bytes,
        respond=_plain_error,
        reroute=submissions_pages.refused_upload_page,
    )
    app.add_middleware(
        SessionMiddleware,
        secret_key=settings.session_secret(),
        session_cookie="kernelgrader_session",
        max_age=settings.session_max_age_seconds,
        same_site="lax",
        https_only=settings.env == "production",
    )
    # Outside the session middleware, so it sees (and marks Secure over HTTPS) its cookie.
    app.add_middleware(SecurityHeadersMiddleware)
    # Outermost: a refused request costs no session decoding, body reading or thread.
    app.add_middleware(
        InFlightLimit,
        max_in_flight=settings.max_requests_in_flight,
        retry_after_seconds=settings.retry_after_seconds,
        respond=_plain_error,
        exempt=(HEALTH_PATH,),
    )
    app.state.login_throttle = FailureThrottle(
        max_failures=settings.login_max_failures, window_seconds=settings.login_window_seconds
    )
    app.state.login_address_throttle = FailureThrottle(
        max_failures=settings.login_max_failures * 5, window_seconds=settings.login_window_seconds
    )
    # "Forgot password" mails a link: a few per account, more per address (a classroom).
    app.state.reset_throttle = FailureThrottle(
        max_failures=RESETS_PER_ACCOUNT, window_seconds=settings.login_window_seconds
    )
    app.state.reset_address_throttle = FailureThrottle(
        max_failures=RESETS_PER_ACCOUNT * 10, window_seconds=settings.login_window_seconds
    )

    @app.exception_handler(DomainError)
    async def domain_error(request: Request, exc: DomainError) -> Response:
        headers: dict[str, str] | None = None
        if isinstance(exc, RateLimited):
            headers = {"Retry-After": str(exc.retry_after), "X-RateLimit-Remaining": "0"}
        elif isinstance(exc, ServerBusy):
            headers = {"Retry-After": str(exc.retry_after)}
        if request.url.path.startswith("/api/"):
            if isinstance(exc, NotAuthenticated):
                headers = {"WWW-Authenticate": "Bearer"}
        elif isinstance(exc, NotAuthenticated):
            target = quote(_return_path(request), safe="/")
            return RedirectResponse(f"/login?next={target}", status_code=303)
        return _error(request, exc.status_code, exc.message, headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        return _error(request, 422, validation_sentence(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        message = str(exc.detail)
        # Starlette's own 404 and 405 say only "Not Found"; say what was asked and what to do.
        if message == HTTPStatus(exc.status_code).phrase:
            message = _http_sentence(request, exc)
        return _error(request, exc.status_code, message, exc.headers)

    @app.exception_handler(DataError)
    async def unstorable(request: Request, exc: DataError) -> Response:
        # What a client sent that the database refuses as a value: PostgreSQL takes no NUL in
        # text and no string past a column's length (SQLite takes both, so it never gets here).
        return _error(request, 422, UNSTORABLE)

    @app.exception_handler(OperationalError)
    @app.exception_handler(InterfaceError)
    @app.exception_handler(PoolTimeout)
    async def database_away(request: Request, exc: Exception) -> Response:
        if not database_unavailable(exc):
            raise exc  # a bug in a query: the 500 handler below answers, and it is logged
        seconds = settings.retry_after_seconds
        return _plain_error(
            request, 503, DATABASE_AWAY.format(seconds=seconds), {"Retry-After": str(seconds)}
        )

    @app.exception_handler(CommitUnconfirmed)
    async def commit_unconfirmed(request: Request, exc: CommitUnconfirmed) -> Response:
        seconds = settings.retry_after_seconds
        return _plain_error(request, 503, exc.message, {"Retry-After": str(seconds)})

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        # Runs outside the session middleware (Starlette re-raises afterwards, so the traceback
        # is still logged): a page without the session, and never the exception's text.
        return _plain_error(request, 500, INTERNAL_ERROR, {})

    # Each feature's API (JSON under /api/v1) and pages; web's own files last.
    for router in (
        fleet_api.router,  # the health check
        submissions_api.router,
        gradebook_api.router,
        policy_api.router,
        grading_api.router,
        performance_api.router,
        auth_api.router,
        profiling_api.router,
        teams_api.router,
        policy_api.late_days_router,
        regrades_api.router,
        rubric_api.router,
        similarity_api.router,
        # Before the submissions' pages: /submissions/compare is not /submissions/{id}.
        profiling_pages.router,
        submissions_pages.router,
        auth_pages.router,
        courses_pages.router,
        # Before the gradebook's pages: /courses/new is not /courses/{course}.
        catalog_pages.router,
        gradebook_pages.router,
        policy_pages.router,
        performance_pages.router,
        grading_pages.router,
        teams_pages.router,
        regrades_pages.router,
        rubric_pages.router,
        similarity_pages.router,
        web_static.router,
    ):
        app.include_router(router)
    add_offline_docs(app)
    app.include_router(fleet_pages.router)
    for router in sign_in_routers():
        app.include_router(router)
    _document_errors_as_sent(app)
    return app


HEALTH_PATH = "/api/v1/health"


def _plain_error(
    request: Request, status_code: int, message: str, headers: Mapping[str, str]
) -> Response:
    """An error answered outside the session middleware: JSON, or the page without a session."""
    if request.url.path.startswith("/api/"):
        return JSONResponse({"detail": message}, status_code=status_code, headers=dict(headers))
    return templates.TemplateResponse(
        request,
        "error.html",
        {"message": message, "user": None, "csrf_token": ""},
        status_code=status_code,
        headers=dict(headers),
    )


def _document_errors_as_sent(app: FastAPI) -> None:
    """The schema FastAPI writes for a 422 is its field list; ours sends a sentence instead."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = FastAPI.openapi(app)
            schemas = schema.get("components", {}).get("schemas", {})
            if "HTTPValidationError" in schemas:
                schemas["HTTPValidationError"] = {
                    "title": "HTTPValidationError",
                    "type": "object",
                    "properties": {"detail": {"type": "string", "title": "Detail"}},
                    "required": ["detail"],
                }
            _errors_are_json(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _errors_are_json(schema: dict[str, Any]) -> None:
    """Errors are JSON on every route, also where the success is a CSV, a zip or text (FastAPI
    documents a route's error models under the success's media type)."""
    for item in schema.get("paths", {}).values():
        for operation in item.values():
            for code, response in operation.get("responses", {}).items():
                content = response.get("content") or {}
                if not code.isdigit() or int(code) < 400 or "application/json" in content:
                    continue
                schemas = [v["schema"] for v in content.values() if "schema" in v]
                if schemas:
                    response["content"] = {"application/json": {"schema": schemas[0]}}


def _return_path(request: Request) -> str:
    """Where to go after logging in: the page asked for, or for a form post the page it was on
    (its target may be a staff-only list, or a POST-only path)."""
    if request.method in ("GET", "HEAD"):
        return request.url.path
    referer = urlsplit(request.headers.get("referer", ""))
    if referer.netloc == request.url.netloc and referer.path.startswith("/"):
        return referer.path
    return "/"


def _error(
    request: Request, status_code: int, message: str, headers: Mapping[str, str] | None = None
) -> Response:
    """JSON `{"detail": sentence}` under /api/, the error page elsewhere."""
    if request.url.path.startswith("/api/"):
        return JSONResponse(
            {"detail": message}, status_code=status_code, headers=dict(headers or {})
        )
    page = render(request, "error.html", {"message": message}, status_code=status_code)
    page.headers.update(headers or {})
    return page


def validation_sentence(errors: Sequence[Any]) -> str:
    """FastAPI's list of field errors as one sentence a person can act on."""
    parts = []
    for error in errors:
        loc = [str(part) for part in error.get("loc", ())]
        where = {"body": "form", "query": "query", "path": "path"}.get(loc[0], "") if loc else ""
        name = ".".join(loc[1:]) or (loc[0] if loc else "")
        if error.get("type") == "missing":
            parts.append(f"the {where} field '{name}' is missing".replace("  ", " "))
        else:
            msg = str(error.get("msg", "is not valid")).rstrip(".")
            parts.append(f"the {where} field '{name}' is not valid ({msg})".replace("  ", " "))
    listed = "; ".join(parts) or "it could not be read"
    return f"The request is not valid: {listed}. Correct it and send it again."


def _http_sentence(request: Request, exc: StarletteHTTPException) -> str:
    path = request.url.path
    api = path.startswith("/api/")
    if exc.status_code == 404:
        if api:
            return f"There is no API endpoint at {path}; the endpoints are listed at /docs."
        return f"There is no page at {path}; check the address, or start from the home page."
    if exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        return f"{request.method} is not allowed on {path}; use {allowed or 'another method'}."
    return f"The request failed ({exc.status_code} {HTTPStatus(exc.status_code).phrase})."


def sign_in_routers() -> list[APIRouter]:
    """The routes of LTI and single sign-on, when the `sso` extra is installed; otherwise pages
    that say how to install it (a web image built without it still starts)."""
    if installed():
        from app.lti.admin import router as lti_admin
        from app.lti.pages import router as lti
        from app.sso.pages import router as sso

        return [lti, lti_admin, sso]
    missing = APIRouter(include_in_schema=False)

    @missing.api_route("/lti/{rest:path}", methods=["GET", "POST"])
    @missing.api_route("/sso/{rest:path}", methods=["GET", "POST"])
    @missing.get("/sso")
    @missing.get("/courses/{course}/lti")
    @missing.get("/admin/lti")
    async def not_installed() -> Response:
        raise NotFound(MISSING)

    return [missing]
