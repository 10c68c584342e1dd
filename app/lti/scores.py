"""Which scores go to which LMS grade column: one column per lab and LMS course, one row per
student in it (app.lti.models.LtiScoreSync) holding the counted score to send.

A row changes only when the counted score (or its maximum) does: a grading that leaves the
counted score as it was sends nothing. The sending itself is app.lti.grades.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.models import UserIdentity
from app.core.database import utcnow
from app.courses.models import Enrollment, Lab, Role
from app.gradebook.service import SCORED_COLUMNS, Scored, counted_submission
from app.lti.models import LtiContext, LtiLineItem, LtiPlatform, LtiScoreSync, SyncState
from app.submissions.models import Submission


def want_line_item(
    session: Session, *, context: LtiContext, lab: Lab, url: str = ""
) -> LtiLineItem:
    """The lab's one grade column in this LMS course: found, else noted to be made (by the
    LMS from a deep link, or by the sender). A `url` the LMS gave fills in one not yet known;
    a known one is kept, so a second link never moves the grades to a second column."""
    row = session.scalar(
        select(LtiLineItem).where(
            LtiLineItem.context_id == context.id, LtiLineItem.lab_id == lab.id
        )
    )
    if row is None:
        row = LtiLineItem(context_id=context.id, lab_id=lab.id, url=url, label=lab.title)
        session.add(row)
        session.flush()
        refresh_scores(session, lab=lab, line_items=[row])
    elif url and not row.url:
        row.url = url
        session.flush()
    return row


def note_grading(session: Session, *, submission: Submission) -> None:
    """A submission got a verdict: its author's counted score may have changed in every LMS
    course whose column holds this lab. Called by the worker in the grading's transaction."""
    lab = session.get(Lab, submission.lab_id)
    if lab is None:
        return
    items = list(session.scalars(select(LtiLineItem).where(LtiLineItem.lab_id == lab.id)))
    if items:
        refresh_scores(session, lab=lab, line_items=items, user_id=submission.user_id)


def refresh_scores(
    session: Session,
    *,
    lab: Lab,
    line_items: list[LtiLineItem],
    user_id: int | None = None,
    now: datetime | None = None,
) -> int:
    """Bring the rows of these columns up to the counted scores (one student's, or every
    enrolled student's); return how many rows now wait to be sent."""
    now = now or utcnow()
    query = select(*SCORED_COLUMNS, Submission.user_id).where(Submission.lab_id == lab.id)
    if user_id is not None:
        query = query.where(Submission.user_id == user_id)
    else:
        query = query.join(
            Enrollment,
            (Enrollment.user_id == Submission.user_id) & (Enrollment.course_id == lab.course_id),
        ).where(Enrollment.role == Role.student.value)
    by_user: dict[int, list[Scored]] = {}
    for row in session.execute(query):
        by_user.setdefault(row[-1], []).append(Scored(*row[:-1]))
    changed = 0
    for item in line_items:
        context = session.get_one(LtiContext, item.context_id)
        platform = session.get_one(LtiPlatform, context.platform_id)
        subjects = _lms_ids(session, issuer=platform.issuer, user_ids=list(by_user))
        for author, submissions in by_user.items():
            counted = counted_submission(lab, submissions)
            if counted is None or author not in subjects:
                continue  # nothing counts yet, or the student never came from this LMS
            created = next(
                s.created_at for s in submissions if s.submission_id == counted.submission_id
            )
            changed += _set_score(
                session,
                item=item,
                user_id=author,
                lms_id=subjects[author],
                score=counted.score,
                max_score=lab.max_score,
                submitted_at=created,
                now=now,
            )
    session.flush()
    return changed


def refresh_student(session: Session, *, context: LtiContext, user_id: int) -> None:
    """A student came through this LMS course: their scores in its columns, as they stand."""
    for item in session.scalars(select(LtiLineItem).where(LtiLineItem.context_id == context.id)):
        lab = session.get(Lab, item.lab_id)
        if lab is not None:
            refresh_scores(session, lab=lab, line_items=[item], user_id=user_id)


def _lms_ids(session: Session, *, issuer: str, user_ids: list[int]) -> dict[int, str]:
    if not user_ids:
        return {}
    rows = session.execute(
        select(UserIdentity.user_id, UserIdentity.subject).where(
            UserIdentity.kind == "lti",
            UserIdentity.issuer == issuer,
            UserIdentity.user_id.in_(user_ids),
        )
    )
    return {user_id: subject for user_id, subject in rows}


def _set_score(
    session: Session,
    *,
    item: LtiLineItem,
    user_id: int,
    lms_id: str,
    score: float,
    max_score: float,
    submitted_at: datetime,
    now: datetime,
) -> int:
    row = session.scalar(
        select(LtiScoreSync).where(
            LtiScoreSync.line_item_id == item.id, LtiScoreSync.user_id == user_id
        )
    )
    if row is None:
        session.add(
            LtiScoreSync(
                line_item_id=item.id,
                user_id=user_id,
                lti_user_id=lms_id,
                score=score,
                max_score=max_score,
                submitted_at=submitted_at,
                state=SyncState.pending.value,
                next_attempt_at=now,
                updated_at=now,
            )
        )
        return 1
    if row.score == score and row.max_score == max_score and row.lti_user_id == lms_id:
        return 0
    row.score, row.max_score, row.lti_user_id = score, max_score, lms_id
    row.submitted_at = submitted_at
    row.state = SyncState.pending.value
    row.attempts = 0
    row.next_attempt_at = now
    row.error = ""
    row.updated_at = now
    return 1
