"""Sending counted scores to the LMSs' grade columns (LTI Assignment and Grade Services).

Rows waiting in `lti_score_syncs` are claimed in a short transaction (a conditional write, so
two workers never send one row at once), sent with no database connection held, and their
outcome written in another short transaction. The LMS's refusal (Canvas while a course is
unpublished, say) is kept for the staff as its status line (what else an LMS answers is not
shown to anyone: app.core.outbound), and the row is tried again later, at growing intervals,
until `MAX_ATTEMPTS`; staff can send it again at once.

A lab's column is found or made once per LMS course (`ensure_column`): looked up in the LMS
by the lab's resource id first, so a column the LMS already has is never made twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from app.core import outbound
from app.core.database import session_scope, utcnow
from app.courses.models import Lab
from app.lti.models import LtiContext, LtiLineItem, LtiPlatform, LtiScoreSync, SyncState

log = logging.getLogger(__name__)

SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
LINEITEM_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
# Canvas reads a score's submission time from its own extension (else it takes the time the
# score arrived, and a score synced after the due date is marked late and docked).
CANVAS_SUBMISSION = "https://canvas.instructure.com/lti/submission"
# The tag kernelgrader's columns carry, beside the lab's id as their resource id.
TAG = "kernelgrader"
MAX_ATTEMPTS = 10
# A claimed row not written back within this (its worker died) is free again.
LEASE_SECONDS = 300


def retry_delay(attempts: int) -> timedelta:
    """1 minute after the first failure, doubling, at most 6 hours."""
    return timedelta(seconds=min(60 * 2 ** max(0, attempts - 1), 6 * 3600))


@dataclass
class SendReport:
    sent: list[int] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)
    columns_made: list[int] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.sent or self.refused or self.columns_made)


@dataclass(frozen=True)
class _Claimed:
    row_id: int
    item_id: int
    platform_id: int
    lineitems_url: str
    scopes: tuple[str, ...]
    item_url: str
    label: str
    lab_slug: str
    score: float
    max_score: float
    lti_user_id: str
    submitted_at: datetime | None
    attempts: int


def send_due_scores(
    *, now: datetime | None = None, limit: int = 100, course_id: int | None = None
) -> SendReport:
    """One pass over the rows due now (of one course's labs, if given)."""
    now = now or utcnow()
    report = SendReport()
    for claimed in _claim(now=now, limit=limit, course_id=course_id):
        try:
            url = claimed.item_url or ensure_column(claimed)
            if not claimed.item_url:
                report.columns_made.append(claimed.item_id)
            _put_score(claimed, url)
        except Exception as exc:  # an LMS's refusal, or the network: kept, tried again later
            reason = lms_reason(exc)
            log.warning("LTI score %s not taken: %s", claimed.row_id, reason)
            _record(claimed, now=now, ok=False, reason=reason)
            report.refused.append(claimed.row_id)
        else:
            _record(claimed, now=now, ok=True, reason="")
            report.sent.append(claimed.row_id)
    return report


def _claim(*, now: datetime, limit: int, course_id: int | None) -> list[_Claimed]:
    due = [SyncState.pending.value, SyncState.refused.value]
    claimed: list[_Claimed] = []
    query = (
        select(LtiScoreSync, LtiLineItem, LtiContext, Lab)
        .join(LtiLineItem, LtiLineItem.id == LtiScoreSync.line_item_id)
        .join(LtiContext, LtiContext.id == LtiLineItem.context_id)
        .join(Lab, Lab.id == LtiLineItem.lab_id)
        .where(
            LtiScoreSync.state.in_(due),
            LtiScoreSync.next_attempt_at <= now,
            # An LMS course unlinked from the lab's course is sent nothing more.
            LtiContext.course_id == Lab.course_id,
        )
        .order_by(LtiScoreSync.next_attempt_at)
        .limit(limit)
    )
    if course_id is not None:
        query = query.where(Lab.course_id == course_id)
    with session_scope() as session:
        rows = session.execute(query).all()
        for row, item, context, lab in rows:
            taken = session.execute(
                update(LtiScoreSync)
                .where(
                    LtiScoreSync.id == row.id,
                    LtiScoreSync.next_attempt_at == row.next_attempt_at,
                    LtiScoreSync.state.in_(due),
                )
                .values(next_attempt_at=now + timedelta(seconds=LEASE_SECONDS))
                .execution_options(synchronize_session=False)
            )
            if taken.rowcount != 1:  # type: ignore[attr-defined]
                continue  # another worker took it
            claimed.append(
                _Claimed(
                    row_id=row.id,
                    item_id=item.id,
                    platform_id=context.platform_id,
                    lineitems_url=context.lineitems_url,
                    scopes=tuple(context.ags_scopes or ()),
                    item_url=item.url,
                    label=item.label or lab.title,
                    lab_slug=lab.slug,
                    score=row.score,
                    max_score=row.max_score,
                    lti_user_id=row.lti_user_id,
                    submitted_at=row.submitted_at,
                    attempts=row.attempts,
                )
            )
    return claimed


def _service(
    platform_id: int, *, lineitems_url: str, scopes: tuple[str, ...], item_url: str
) -> Any:
    from pylti1p3.assignments_grades import AssignmentsGradesService

    from app.lti.tool import CachingServiceConnector, registration_of

    with session_scope() as session:
        platform = session.get_one(LtiPlatform, platform_id)
        registration = registration_of(session, platform)
    data: dict[str, Any] = {"scope": list(scopes), "lineitems": lineitems_url}
    if item_url:
        data["lineitem"] = item_url
    return AssignmentsGradesService(CachingServiceConnector(registration), data)  # type: ignore[arg-type]


def ensure_column(claimed: _Claimed) -> str:
    """The lab's column in this LMS course: its URL once known; else found in the LMS by the
    lab's resource id, else made; the URL is written back so it is asked for once."""
    from pylti1p3.lineitem import LineItem

    with session_scope() as session:
        known = session.get_one(LtiLineItem, claimed.item_id).url
    if known:
        return known
    if not claimed.lineitems_url or LINEITEM_SCOPE not in claimed.scopes:
        raise ColumnUnavailable(
            "The LMS did not allow kernelgrader to make grade columns in this course (no "
            "line items service or scope in the launch); place the lab through deep linking "
            "or as an assignment, then launch it once."
        )
    service = _service(
        claimed.platform_id,
        lineitems_url=claimed.lineitems_url,
        scopes=claimed.scopes,
        item_url="",
    )
    wanted = (
        LineItem()
        .set_label(claimed.label)
        .set_score_maximum(claimed.max_score)
        .set_resource_id(claimed.lab_slug)
        .set_tag(TAG)
    )
    made = service.find_or_create_lineitem(
        wanted,
        condition=lambda item: (
            item.get("resourceId") == claimed.lab_slug and item.get("tag") in (TAG, None)
        ),
    )
    url = str(made.get_id() or "")
    with session_scope() as session:
        item = session.get_one(LtiLineItem, claimed.item_id)
        if not item.url:  # another worker's may have landed first: keep the first
            item.url = url
        return item.url


class ColumnUnavailable(Exception):
    pass


def _put_score(claimed: _Claimed, url: str) -> None:
    from pylti1p3.grade import Grade
    from pylti1p3.lineitem import LineItem

    service = _service(
        claimed.platform_id,
        lineitems_url=claimed.lineitems_url,
        scopes=claimed.scopes,
        item_url=url,
    )
    now = utcnow()
    grade = (
        Grade()
        .set_score_given(claimed.score)
        .set_score_maximum(claimed.max_score)
        .set_timestamp(_iso(now))
        .set_activity_progress("Completed")
        .set_grading_progress("FullyGraded")
        .set_user_id(claimed.lti_user_id)
    )
    if claimed.submitted_at is not None:
        grade.set_submitted_at(_iso(claimed.submitted_at))
        grade.set_extra_claims(
            {
                CANVAS_SUBMISSION: {
                    "new_submission": True,
                    "submitted_at": _iso(claimed.submitted_at),
                }
            }
        )
    service.put_grade(grade, LineItem({"id": url}))


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def lms_reason(exc: Exception) -> str:
    """What went wrong, in our words: the LMS's status line, or the step that failed; what
    else an LMS answered is never stored or shown (app.core.outbound)."""
    if isinstance(exc, ColumnUnavailable):
        return str(exc)
    return outbound.reason(exc)


def _record(claimed: _Claimed, *, now: datetime, ok: bool, reason: str) -> None:
    with session_scope() as session:
        row = session.get(LtiScoreSync, claimed.row_id)
        if row is None:
            return
        changed = row.score != claimed.score or row.max_score != claimed.max_score
        row.updated_at = now
        if ok:
            row.sent_score = claimed.score
            row.sent_at = now
            row.error = ""
            row.attempts = 0
            # A newer score that arrived while this one was on its way goes next.
            row.state = SyncState.pending.value if changed else SyncState.sent.value
            row.next_attempt_at = now
            return
        row.attempts = claimed.attempts + 1
        row.error = reason
        if changed:
            row.state, row.attempts, row.next_attempt_at = SyncState.pending.value, 0, now
        elif row.attempts >= MAX_ATTEMPTS:
            row.state = SyncState.failed.value
        else:
            row.state = SyncState.refused.value
            row.next_attempt_at = now + retry_delay(row.attempts)


def retry_now(session: Session, *, course_id: int, now: datetime | None = None) -> int:
    """Staff's "send again": every refused or failed score of the course is due now."""
    now = now or utcnow()
    ids = (
        select(LtiScoreSync.id)
        .join(LtiLineItem, LtiLineItem.id == LtiScoreSync.line_item_id)
        .join(Lab, Lab.id == LtiLineItem.lab_id)
        .where(
            Lab.course_id == course_id,
            or_(
                LtiScoreSync.state == SyncState.refused.value,
                LtiScoreSync.state == SyncState.failed.value,
            ),
        )
    )
    result = session.execute(
        update(LtiScoreSync)
        .where(LtiScoreSync.id.in_(ids))
        .values(state=SyncState.pending.value, attempts=0, next_attempt_at=now)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount  # type: ignore[attr-defined,no-any-return]
