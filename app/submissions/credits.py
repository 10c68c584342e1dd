"""Who a submission counts for: its author, and the other members of the team it was made for
at that moment (app.teams). Written at intake; read by everything that counts, lists or shows
submissions."""

from __future__ import annotations

from sqlalchemy import Select, select, union_all
from sqlalchemy.orm import Session

from app.courses.models import Lab
from app.submissions.models import Submission
from app.teams.models import SubmissionCredit
from app.teams.service import current_members, team_of


def credit_submission(session: Session, *, submission: Submission, lab: Lab) -> list[int]:
    """At intake: record the author's team and credit its other members of this moment."""
    if lab.team_size <= 1:
        return []
    team = team_of(session, lab=lab, user_id=submission.user_id)
    if team is None:
        return []
    submission.team_id = team.id
    others = [u.id for u in current_members(session, team=team) if u.id != submission.user_id]
    for user_id in others:
        session.add(SubmissionCredit(submission_id=submission.id, user_id=user_id))
    session.flush()
    return others


def credited_pairs(lab_ids: list[int], user_id: int | None = None) -> Select[tuple[int, int]]:
    """(submission id, user id) for every submission of these labs and every student it
    counts for: its author, and its team's other members of its moment. With `user_id`, only
    that student's, filtered inside each half so both use their user index (a student's
    page or upload never reads the whole lab)."""
    ids = lab_ids or [-1]
    authored = select(
        Submission.id.label("submission_id"), Submission.user_id.label("user_id")
    ).where(Submission.lab_id.in_(ids))
    credited = (
        select(SubmissionCredit.submission_id, SubmissionCredit.user_id)
        .join(Submission, Submission.id == SubmissionCredit.submission_id)
        .where(Submission.lab_id.in_(ids))
    )
    if user_id is not None:
        authored = authored.where(Submission.user_id == user_id)
        credited = credited.where(SubmissionCredit.user_id == user_id)
    return union_all(authored, credited)  # type: ignore[return-value]


def credited_users(session: Session, *, submission_id: int) -> list[int]:
    """Everyone a submission counts for: its author first, then its team's other members."""
    author = session.scalar(select(Submission.user_id).where(Submission.id == submission_id))
    others = session.scalars(
        select(SubmissionCredit.user_id)
        .where(SubmissionCredit.submission_id == submission_id)
        .order_by(SubmissionCredit.user_id)
    )
    return ([author] if author is not None else []) + list(others)


def is_credited(session: Session, *, submission_id: int, user_id: int) -> bool:
    """Whether a submission counts for this student as a member of its team."""
    return (
        session.scalar(
            select(SubmissionCredit.id).where(
                SubmissionCredit.submission_id == submission_id,
                SubmissionCredit.user_id == user_id,
            )
        )
        is not None
    )
