"""Which scores go to which LMS grade column: one column per lab and LMS course, one row per
student in it (app.lti.models.LtiScoreSync) holding the counted score to send.

A score's maximum is the lab's, rubric items included (app.rubric.service.points_possible), as
on every page and in the CSVs. A row changes only when the counted score (or its maximum) does:
a grading that leaves the counted score as it was sends nothing.
The sending itself is app.lti.grades.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import Course, Enrollment, Lab, Role
from app.courses.release import is_released
from app.lti.models import LtiContext, LtiLineItem, LtiScoreSync, SyncState
from app.policy.counting import student_cell
from app.rubric.service import followers as rubric_followers
from app.rubric.service import points_possible
from app.submissions.credits import credited_users
from app.submissions.models import Submission
from app.users.models import UserIdentity


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
    """A submission got a verdict: the counted score of its author, and of every teammate it
    counts for, may have changed in every LMS course whose column holds this lab. Called by
    the worker in the grading's transaction."""
    lab = session.get(Lab, submission.lab_id)
    if lab is None:
        return
    items = _columns_of(session, lab=lab)
    if not items:
        return

    for user_id in credited_users(session, submission_id=submission.id):
        refresh_scores(session, lab=lab, line_items=items, user_id=user_id)


def follow_rubric() -> None:
    """Rubric changes reach the LMS's columns (app.rubric.service.followers): called by the
    web app and the CLI as they start; calling it again adds nothing."""
    if note_rubric not in rubric_followers:
        rubric_followers.append(note_rubric)


def note_rubric(session: Session, *, lab: Lab, user_id: int | None = None) -> None:
    """A student's rubric points changed (or, with no `user_id`, the lab's items, and so its
    maximum, for everyone): their rows of the lab's columns follow. The caller commits."""
    items = _columns_of(session, lab=lab)
    if items:
        refresh_scores(session, lab=lab, line_items=items, user_id=user_id)


def _columns_of(session: Session, *, lab: Lab) -> list[LtiLineItem]:
    """The lab's columns in LMS courses still linked to its course (an unlinked one gets
    nothing)."""
    return list(
        session.scalars(
            select(LtiLineItem)
            .join(LtiContext, LtiContext.id == LtiLineItem.context_id)
            .where(LtiLineItem.lab_id == lab.id, LtiContext.course_id == lab.course_id)
        )
    )


def refresh_scores(
    session: Session,
    *,
    lab: Lab,
    line_items: list[LtiLineItem],
    user_id: int | None = None,
    now: datetime | None = None,
) -> int:
    """Bring the rows of these columns up to the counted scores, as the gradebook counts them
    (a team's submission for each member, late days and the lab's late penalty, rubric points
    once the grades are released), for one student or every enrolled student; return how many
    rows now wait to be sent."""
    now = now or utcnow()
    if user_id is not None:
        students = [user_id]
    else:
        students = list(
            session.scalars(
                select(Enrollment.user_id).where(
                    Enrollment.course_id == lab.course_id,
                    Enrollment.role == Role.student.value,
                )
            )
        )
    course = session.get_one(Course, lab.course_id)
    released = is_released(course, lab, now=now)
    cells = {sid: student_cell(session, lab=lab, user_id=sid, rubric=released) for sid in students}
    # The maximum the pages and CSVs show, rubric items included (before the grades' release
    # too: the column's points do not move when the rubric points arrive).
    most = points_possible(session, labs=[lab])[lab.id]
    changed = 0
    for item in line_items:
        context = session.get_one(LtiContext, item.context_id)
        subjects = _lms_ids(session, platform_id=context.platform_id, user_ids=list(cells))
        for student, cell in cells.items():
            if cell.score is None or student not in subjects:
                continue  # nothing counts yet, or the student never came from this LMS
            submitted = cell.counted.created_at if cell.counted is not None else None
            changed += _set_score(
                session,
                item=item,
                user_id=student,
                lms_id=subjects[student],
                score=cell.score,
                max_score=most,
                submitted_at=submitted or now,
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


def _lms_ids(session: Session, *, platform_id: int, user_ids: list[int]) -> dict[int, str]:
    """Each student's id in this registration's LMS (its `sub`), where they came from it."""
    if not user_ids:
        return {}
    rows = session.execute(
        select(UserIdentity.user_id, UserIdentity.subject).where(
            UserIdentity.platform_id == platform_id,
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
