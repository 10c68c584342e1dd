"""How the API's errors are documented: every error is `{"detail": "<a sentence>"}`, and each
route lists the statuses it can answer with, so /docs and clients see them all."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ErrorDetail(BaseModel):
    """Every error answer of the API."""

    detail: str = Field(
        description="a sentence saying what happened and what to do next",
        examples=["There is no course named gpu26."],
    )


_RETRY_AFTER = {
    "Retry-After": {
        "description": "seconds to wait before sending the request again",
        "schema": {"type": "integer"},
    }
}

ERRORS: dict[int, dict[str, Any]] = {
    401: {
        "description": "No API token was sent, or it is not valid or was revoked (send "
        "'Authorization: Bearer <token>'; create one on /account)",
        "headers": {"WWW-Authenticate": {"schema": {"type": "string"}}},
    },
    403: {"description": "The token's user may not do this: not a member, or not staff"},
    404: {"description": "No such course, lab, submission or user (that the caller may see)"},
    409: {"description": "It conflicts with the current state (already grading, name taken)"},
    413: {"description": "The upload is over KERNELGRADER_MAX_UPLOAD_BYTES"},
    429: {
        "description": "Too many submissions to this lab in the window; wait Retry-After seconds",
        "headers": _RETRY_AFTER,
    },
    503: {
        "description": "The server is busy or its database is away; nothing was stored, so "
        "send it again after Retry-After seconds",
        "headers": _RETRY_AFTER,
    },
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of a route that can answer with these error statuses."""
    return {code: {"model": ErrorDetail, **ERRORS[code]} for code in codes}


# The statuses every route with a token can answer with, and those that read a course's rows.
TOKEN = (401, 503)
COURSE = (401, 403, 404, 503)
