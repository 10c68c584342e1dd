"""API tokens over the API: a holder can revoke the token it is using (say, after a leak)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from sqlalchemy.orm import Session

from app.api.errors import errors
from app.core.errors import NotAuthenticated
from app.users.service import revoke_token
from app.web.deps import PublicDb, bearer_scheme

router = APIRouter(prefix="/api/v1", tags=["tokens"])


@router.delete(
    "/tokens/current",
    status_code=204,
    responses=errors(401, 503),
    dependencies=[Depends(bearer_scheme)],
)
async def revoke_current_token(request: Request, db: PublicDb) -> Response:
    """Revoke the bearer token this request carries; it stops working at once."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise NotAuthenticated(
            "Send the token to revoke in the header 'Authorization: Bearer <token>'."
        )

    def work(session: Session) -> Response:
        if not revoke_token(session, token=token.strip()):
            raise NotAuthenticated("The API token is not valid or was already revoked.")
        return Response(status_code=204)

    return await db.run(work)
