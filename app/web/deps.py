"""How a request reaches the database: all of its database work in one thread hop.

A handler is `async def`; it hands one plain function to `run()`, which takes a thread from the
web process's request threads (KERNELGRADER_WEB_THREADS) and there opens the session, checks
who is calling, does the work, and commits or rolls back. A request therefore holds a database
connection only while it has a thread, and never waits for a thread while holding one: with the
pool at least as large as the threads, no number of requests can wedge the server (FastAPI's
sync dependencies and handlers each take a thread of their own, and a session opened in one
held its connection while the request queued for the next).

What the dependencies below read (headers, the login cookie) needs no database, so they run on
the event loop.

A login session is a signed cookie that names the account and when the session began; a
session that began before the account's `sessions_ended_at` (a new password, "sign out
everywhere") is over, checked on every request that reads it.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, TypeVar

import anyio
from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from app.core.database import session_scope, utcnow
from app.core.errors import NotAuthenticated, ServerBusy
from app.core.overload import BUSY, DATABASE_AWAY
from app.core.settings import get_settings
from app.courses.service import is_staff_anywhere
from app.users.models import User
from app.users.service import holder_of_token
from app.users.token_use import token_uses

T = TypeVar("T")

_limiters: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[str, anyio.CapacityLimiter]
] = weakref.WeakKeyDictionary()

# The health check's own threads, so it answers while every request thread is busy.
HEALTH_THREADS = 2


def _limiter(name: str, tokens: int) -> anyio.CapacityLimiter:
    # A limiter belongs to the event loop it was made on; tests start a loop per test.
    per_loop = _limiters.setdefault(asyncio.get_running_loop(), {})
    if name not in per_loop:
        per_loop[name] = anyio.CapacityLimiter(tokens)
    return per_loop[name]


def request_threads() -> anyio.CapacityLimiter:
    return _limiter("requests", get_settings().web_threads)


async def in_request_thread(work: Callable[[], T]) -> T:
    """Run `work` in a request thread; 503 when none frees up within the allowed wait."""
    settings = get_settings()
    threads = request_threads()
    with anyio.move_on_after(settings.max_request_wait_seconds) as waited:
        await threads.acquire()
    if waited.cancelled_caught:
        seconds = settings.retry_after_seconds
        raise ServerBusy(BUSY.format(seconds=seconds), retry_after=seconds)
    try:
        # The token taken above is what bounds the threads; this limiter never makes it wait.
        return await anyio.to_thread.run_sync(work, limiter=_limiter("taken", settings.web_threads))
    finally:
        threads.release()


# A health check answers within this, whatever the database does: a probe that connects to
# a PostgreSQL still starting up can wait for libpq's shortest connect timeout, two seconds.
HEALTH_ANSWER_SECONDS = 0.9


async def in_health_thread(work: Callable[[], T]) -> T:
    """Run the health probe on its own threads; 503 (database away) if it takes too long."""
    with anyio.move_on_after(HEALTH_ANSWER_SECONDS):
        # Abandoned, not awaited, past the deadline: the probe ends at its own timeouts.
        return await anyio.to_thread.run_sync(
            work, limiter=_limiter("health", HEALTH_THREADS), abandon_on_cancel=True
        )
    seconds = get_settings().retry_after_seconds
    raise ServerBusy(DATABASE_AWAY.format(seconds=seconds), retry_after=seconds)


def _unit_of_work(work: Callable[[Session], T]) -> T:
    with session_scope() as session:
        return work(session)


@dataclass(frozen=True)
class Viewer:
    """Who is looking at a page, for its header (staff of some course get a link to
    /admin/system there, site administrators one to /admin/lti)."""

    id: int
    email: str
    is_staff: bool = False
    is_site_admin: bool = False


@dataclass(frozen=True)
class PublicRequest:
    """A request that needs no login (the login form itself)."""

    async def run(self, work: Callable[[Session], T]) -> T:
        return await in_request_thread(lambda: _unit_of_work(work))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _microseconds(at: datetime) -> int:
    # Exact, unlike a float timestamp: a session begun in the same microsecond as the end of
    # the sessions before it (the owner's own, at a password change) must compare equal.
    return (at - _EPOCH) // timedelta(microseconds=1)


@dataclass(frozen=True)
class CookieLogin:
    """Who the login cookie names, and when that session began (0: a cookie from before
    sessions carried it, which counts until the account's sessions are first ended)."""

    user_id: int
    since: int

    def user(self, session: Session) -> User | None:
        user = session.get(User, self.user_id)
        if user is None:
            return None
        ended = user.sessions_ended_at
        return user if ended is None or self.since >= _microseconds(ended) else None


@dataclass(frozen=True)
class ApiRequest:
    """An API request: a bearer token, or for reads only the web login cookie (the pages poll)."""

    bearer: str | None
    login: CookieLogin | None
    read_only: bool

    def user(self, session: Session) -> User:
        if self.bearer:
            holder = holder_of_token(session, token=self.bearer)
            if holder is None:
                raise NotAuthenticated(
                    "The API token is not valid or was revoked; create one on your account "
                    "page (/account), or with `kernelgrader token create EMAIL`."
                )
            token_uses.note(holder.token_id, last_used_at=holder.last_used_at, now=utcnow())
            return holder.user
        if self.read_only and self.login is not None:
            user = self.login.user(session)
            if user is not None:
                return user
        raise NotAuthenticated(
            "This needs an API token: send the header 'Authorization: Bearer <token>'."
        )

    async def run(self, work: Callable[[Session, User], T]) -> T:
        return await in_request_thread(lambda: _unit_of_work(lambda s: work(s, self.user(s))))


@dataclass(frozen=True)
class WebRequest:
    """A page request from someone logged in with the web login cookie."""

    request: Request
    login: CookieLogin | None

    def user(self, session: Session) -> User:
        user = self.login.user(session) if self.login is not None else None
        if user is None:
            raise NotAuthenticated("Log in to see this page.")
        # A plain copy for the page header: error pages render after the session has closed.
        self.request.state.viewer = Viewer(
            id=user.id,
            email=user.email,
            is_staff=is_staff_anywhere(session, user_id=user.id),
            is_site_admin=user.is_site_admin,
        )
        return user

    async def run(self, work: Callable[[Session, User], T]) -> T:
        return await in_request_thread(lambda: _unit_of_work(lambda s: work(s, self.user(s))))


def start_session(request: Request, user_id: int) -> None:
    """A fresh login session (and CSRF token) for the account, at every way of signing in."""
    request.session.clear()
    request.session["user_id"] = user_id
    request.session["since"] = _microseconds(utcnow())


def cookie_login(request: Request) -> CookieLogin | None:
    user_id, since = request.session.get("user_id"), request.session.get("since", 0)
    if not isinstance(user_id, int) or not isinstance(since, int):
        return None
    return CookieLogin(user_id=user_id, since=since)


async def public_request() -> PublicRequest:
    return PublicRequest()


# Declares the bearer token in the OpenAPI schema (so /docs has an Authorize button and sends
# it); the header itself is read below, the same whether or not it parses as FastAPI expects.
bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="apiToken",
    description="An API token (kg_...): create one on your account page (/account), or with "
    "`kernelgrader token create EMAIL`.",
)


async def api_request(
    request: Request,
    _declared: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)] = None,
) -> ApiRequest:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return ApiRequest(
        bearer=token.strip() if scheme.lower() == "bearer" and token.strip() else None,
        login=cookie_login(request),
        read_only=request.method in ("GET", "HEAD"),
    )


async def web_request(request: Request) -> WebRequest:
    return WebRequest(request=request, login=cookie_login(request))


PublicDb = Annotated[PublicRequest, Depends(public_request)]
ApiDb = Annotated[ApiRequest, Depends(api_request)]
WebDb = Annotated[WebRequest, Depends(web_request)]

# Database ids are 64-bit; a bigger number in a URL is a 422, not an overflow deep in the driver.
RowId = Annotated[int, Path(ge=1, le=2**63 - 1)]
