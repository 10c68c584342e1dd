"""A refused sign-in is told in a sentence to the person and in detail to the staff.

The person reads what happened, what to do, and a short reference; the staff find the same
reference with the detail (which claim was missing, what the LMS sent, why the token was
refused) on /admin/sign-in and in the log.
"""

from __future__ import annotations

import logging
import secrets

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.models import SignInProblem

log = logging.getLogger("kernelgrader.sign_in")


class SignInRefused(Exception):
    """A sign-in or launch that is refused: `sentence` for the person, `detail` for staff."""

    status_code = 400

    def __init__(self, sentence: str, detail: str, *, kind: str, source: str = "") -> None:
        super().__init__(sentence)
        self.sentence = sentence
        self.detail = detail
        self.kind = kind
        self.source = source


def new_reference() -> str:
    return secrets.token_hex(4).upper()


def record(session: Session, refused: SignInRefused) -> str:
    """Log the refusal and keep it for the staff. Called in a unit of work of its own, after
    the refused one was rolled back (a refused launch creates nothing). Returns the reference."""
    reference = new_reference()
    log.warning(
        "sign-in refused (%s %s, reference %s): %s | %s",
        refused.kind,
        refused.source or "-",
        reference,
        refused.sentence,
        refused.detail,
    )
    session.add(
        SignInProblem(
            kind=refused.kind,
            source=refused.source[:200],
            reference=reference,
            sentence=refused.sentence,
            detail=refused.detail[:20000],
        )
    )
    session.flush()
    return reference


def recent(session: Session, *, limit: int = 50) -> list[SignInProblem]:
    return list(
        session.scalars(
            select(SignInProblem).order_by(SignInProblem.created_at.desc()).limit(limit)
        )
    )
