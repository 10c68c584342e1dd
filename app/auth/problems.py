"""A refused sign-in is told in a sentence to the person and in detail to the staff.

The person reads what happened, what to do, and a short reference; the log has the same
reference with the detail (which claim was missing, what the LMS sent, why the token was
refused). A record is kept only for an attempt that came through a provider or LMS
registration we know (a launch that names an unknown issuer, or a deployment its
registration lacks, could come from anyone: it is logged, not stored), filed under the course
its LMS course is linked to (that course's staff read it on the course's LMS page) and, for
site administrators, under its registration (/admin/sign-in). Records are short, at most
`KEPT_PER_PLACE` per course or registration, and gone after KERNELGRADER_SIGN_IN_PROBLEM_DAYS.
"""

from __future__ import annotations

import logging
import secrets
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.auth.models import SignInProblem
from app.core.database import utcnow
from app.core.settings import get_settings

log = logging.getLogger("kernelgrader.sign_in")

# The newest this many per course (or per registration, or per provider) are kept.
KEPT_PER_PLACE = 500
DETAIL_CHARS = 2000


class SignInRefused(Exception):
    """A sign-in or launch that is refused: `sentence` for the person, `detail` for staff.
    `platform_id` is set for a launch that named a registration and deployment we know,
    `course_id` where its LMS course is linked to a course."""

    status_code = 400

    def __init__(
        self,
        sentence: str,
        detail: str,
        *,
        kind: str,
        source: str = "",
        platform_id: int | None = None,
        course_id: int | None = None,
    ) -> None:
        super().__init__(sentence)
        self.sentence = sentence
        self.detail = detail
        self.kind = kind
        self.source = source
        self.platform_id = platform_id
        self.course_id = course_id

    @property
    def kept(self) -> bool:
        """An LTI refusal is kept only for a registration we know."""
        return self.kind != "lti" or self.platform_id is not None


def new_reference() -> str:
    return secrets.token_hex(4).upper()


def record(session: Session, refused: SignInRefused) -> str:
    """Log the refusal and keep it where it belongs. Called in a unit of work of its own, after
    the refused one was rolled back (a refused launch creates nothing). Returns the reference."""
    reference = new_reference()
    log.warning(
        "sign-in refused (%s %s, reference %s): %s | %s",
        refused.kind,
        refused.source[:200] or "-",
        reference,
        refused.sentence,
        refused.detail[:DETAIL_CHARS],
    )
    if not refused.kept:
        return reference
    now = utcnow()
    session.add(
        SignInProblem(
            kind=refused.kind,
            source=refused.source[:200],
            platform_id=refused.platform_id,
            course_id=refused.course_id,
            reference=reference,
            sentence=refused.sentence[:500],
            detail=refused.detail[:DETAIL_CHARS],
            created_at=now,
        )
    )
    session.flush()
    _prune(session, refused, now=now)
    return reference


def _prune(session: Session, refused: SignInRefused, *, now: datetime) -> None:
    """Past the retention period, and past the newest KEPT_PER_PLACE of this place, go."""
    days = get_settings().sign_in_problem_days
    session.execute(
        delete(SignInProblem)
        .where(SignInProblem.created_at < now - timedelta(days=days))
        .execution_options(synchronize_session=False)
    )
    if refused.course_id is not None:
        place = SignInProblem.course_id == refused.course_id
    elif refused.platform_id is not None:
        place = (SignInProblem.platform_id == refused.platform_id) & SignInProblem.course_id.is_(
            None
        )
    else:
        place = (SignInProblem.kind == refused.kind) & (
            SignInProblem.source == refused.source[:200]
        )
    newest = (
        select(SignInProblem.id)
        .where(place)
        .order_by(SignInProblem.id.desc())
        .limit(KEPT_PER_PLACE)
        .scalar_subquery()
    )
    session.execute(
        delete(SignInProblem)
        .where(place, SignInProblem.id.not_in(newest))
        .execution_options(synchronize_session=False)
    )


def recent(
    session: Session, *, limit: int = 50, course_id: int | None = None
) -> list[SignInProblem]:
    """The latest refusals: every one (site administrators), or one course's."""
    query = select(SignInProblem).order_by(SignInProblem.created_at.desc()).limit(limit)
    if course_id is not None:
        query = query.where(SignInProblem.course_id == course_id)
    return list(session.scalars(query))
