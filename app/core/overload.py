"""Refusing work the server cannot take now, with a sentence, instead of wedging or a 500.

Two cases: more requests in flight than the bound (the server is busy), and a database that is
away (PostgreSQL restarting, SQLite locked past its short wait). Both are answered 503 with
`Retry-After`; neither is the client's fault nor a bug.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from contextlib import suppress

from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.database import pending_after_commit, run_after_commit, session_scope

BUSY = (
    "The server is busy with many requests right now and did not take this one, so nothing "
    "was stored or changed; send it again in {seconds} seconds."
)
UNCONFIRMED = (
    "The database went away while your upload was being stored and has not come back to say "
    "whether it was; look at your submissions for this lab in a minute before sending it "
    "again."
)
DATABASE_AWAY = (
    "The database did not answer in time (it may be restarting, or busy), so this request "
    "stored and changed nothing; send it again in {seconds} seconds."
)

# SQLite says so in words: another writer held the lock past busy_timeout, or the file is gone.
_SQLITE_AWAY = ("locked", "busy", "unable to open", "disk i/o")


def database_unavailable(exc: BaseException) -> bool:
    """Whether a database error means "away for now" rather than a bug in a query."""
    if isinstance(exc, PoolTimeout):
        return True
    if not isinstance(exc, (OperationalError, InterfaceError)):
        return False
    if exc.connection_invalidated:
        return True
    if isinstance(exc.orig, sqlite3.Error):
        # "no such table" is an OperationalError too, and a bug.
        return any(word in str(exc.orig).lower() for word in _SQLITE_AWAY)
    # psycopg raises OperationalError/InterfaceError for a lost, refused or closing connection
    # (a query's own mistakes are ProgrammingError, DataError, IntegrityError...).
    return True


Responder = Callable[[Request, int, str, dict[str, str]], Response]


class InFlightLimit:
    """Pure ASGI: past `max_in_flight` requests under way, answer 503 at once.

    Exempt paths (the health check) are neither counted nor refused, so a load balancer's
    probe answers while the server sheds load.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_in_flight: int,
        retry_after_seconds: int,
        respond: Responder,
        exempt: tuple[str, ...] = (),
    ) -> None:
        self.app = app
        self.max_in_flight = max_in_flight
        self.retry_after_seconds = retry_after_seconds
        self.respond = respond
        self.exempt = exempt
        self.in_flight = 0
        self.refused = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path", "") in self.exempt:
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.max_in_flight:
            self.refused += 1
            seconds = self.retry_after_seconds
            response = self.respond(
                Request(scope),
                503,
                BUSY.format(seconds=seconds),
                {"Retry-After": str(seconds)},
            )
            await response(scope, receive, send)
            return
        # One event loop per process runs this, so a plain counter is exact.
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


def commit_or_confirm(
    session: Session, *, landed: Callable[[Session], bool], wait_seconds: float = 5.0
) -> None:
    """Commit; when the connection broke during the commit, find out whether it landed.

    A commit whose connection is lost (PostgreSQL shutting down) may have been made durable
    just before: answering "nothing was stored" would then be false. So ask again, over a new
    connection, for up to `wait_seconds`: return if it landed, raise the original error (a
    503 that says nothing was stored) if it did not, and `CommitUnconfirmed` if the database
    did not come back to say. A SQLite commit that fails has rolled back: no doubt there.
    """
    # What waits for the commit (jobs for the broker) is dropped with the rollback below;
    # kept here, it runs if the commit turns out to have landed.
    actions = pending_after_commit(session)
    try:
        session.commit()
        return
    except (OperationalError, InterfaceError) as exc:
        if not exc.connection_invalidated:
            raise
        lost = exc
    with suppress(OperationalError, InterfaceError, PoolTimeout):
        session.rollback()
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            with session_scope() as check:
                found = landed(check)
        except (OperationalError, InterfaceError, PoolTimeout) as exc:
            if not database_unavailable(exc) or time.monotonic() > deadline:
                raise CommitUnconfirmed(UNCONFIRMED) from lost
            time.sleep(0.5)
            continue
        if found:
            run_after_commit(actions)
            return
        raise lost


class CommitUnconfirmed(Exception):
    """The database did not come back to say whether a commit landed."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
