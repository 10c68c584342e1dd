"""Request-scoped dependencies shared by the API and the pages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Path, Request
from sqlalchemy.orm import Session

from app.core.database import session_scope
from app.core.errors import NotAuthenticated
from app.users.models import User
from app.users.service import user_for_token


def get_db() -> Iterator[Session]:
    """One unit of work per request: commit when the handler returns, roll back if it raises."""
    with session_scope() as session:
        yield session


# scope="function": the session commits before the response goes out, not after.
SessionDep = Annotated[Session, Depends(get_db, scope="function")]


def session_user(request: Request, session: Session) -> User | None:
    user_id = request.session.get("user_id")
    return session.get(User, user_id) if isinstance(user_id, int) else None


def api_user(request: Request, session: SessionDep) -> User:
    """A bearer token; or, for reads only, the web login cookie (the pages poll the API)."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        user = user_for_token(session, token=token.strip())
        if user is None:
            raise NotAuthenticated(
                "The API token is not valid or was revoked; create one with "
                "`kernelgrader token create EMAIL`."
            )
        return user
    if request.method in ("GET", "HEAD"):
        user = session_user(request, session)
        if user is not None:
            return user
    raise NotAuthenticated(
        "This needs an API token: send the header 'Authorization: Bearer <token>'."
    )


ApiUser = Annotated[User, Depends(api_user)]

# Database ids are 64-bit; a bigger number in a URL is a 422, not an overflow deep in the driver.
RowId = Annotated[int, Path(ge=1, le=2**63 - 1)]
