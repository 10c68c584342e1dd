"""Submission rate limits: how many submissions one student may make to one lab per window.

Counted from the submissions table itself, so every web replica agrees and nothing else needs
storing. Staff are not limited: they try labs out before students do. A team's submissions count
for each of its members (app.submissions.credits.credited_pairs), so a team has one quota, not one
per member.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select, union_all
from sqlalchemy.orm import Session

from app.core.errors import RateLimited
from app.core.settings import get_settings
from app.courses.models import Course, Lab
from app.courses.service import role_in
from app.submissions.models import Submission
from app.teams.models import SubmissionCredit
from app.users.models import User


@dataclass(frozen=True)
class Quota:
    """Where one user stands against one lab's limit; limit None means unlimited."""

    limit: int | None
    used: int
    window_seconds: int
    reset_at: datetime | None  # when the oldest counted submission leaves the window

    @property
    def remaining(self) -> int | None:
        return None if self.limit is None else max(0, self.limit - self.used)

    def seconds_to_reset(self, now: datetime) -> int:
        if self.reset_at is None:
            return 0
        return max(1, math.ceil((self.reset_at - now).total_seconds()))

    def headers(self, now: datetime) -> dict[str, str]:
        """X-RateLimit-* headers for an API response; none when unlimited."""
        if self.limit is None:
            return {}
        return {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(self.seconds_to_reset(now)),
        }

    def sentence(self, now: datetime) -> str:
        """For the lab page: how many submissions are left, and when more become available."""
        if self.limit is None:
            return ""
        window = _duration(self.window_seconds)
        left = f"{self.remaining} of {self.limit}"
        text = f"You have {left} submissions left for this lab per {window}"
        if self.remaining == 0:
            return text + f"; the next one is possible in {_duration(self.seconds_to_reset(now))}."
        return text + "."


def _duration(seconds: int) -> str:
    if seconds % 3600 == 0 and seconds >= 3600:
        hours = seconds // 3600
        return "hour" if hours == 1 else f"{hours} hours"
    if seconds >= 60:
        minutes = math.ceil(seconds / 60)
        return "minute" if minutes == 1 else f"{minutes} minutes"
    return "second" if seconds == 1 else f"{seconds} seconds"


def submission_quota(session: Session, *, user: User, lab: Lab, now: datetime) -> Quota:
    settings = get_settings()
    window = settings.submission_rate_window_seconds
    limit = settings.submission_rate_limit
    role = role_in(session, user=user, course=session.get_one(Course, lab.course_id))
    if limit <= 0 or (role is not None and role.is_staff):
        return Quota(limit=None, used=0, window_seconds=window, reset_at=None)
    since = now - timedelta(seconds=window)
    # The student's own submissions and their teams' that count for them, each half by its
    # user index: the count runs under the student's write turn, so it must stay small.
    authored = select(Submission.created_at.label("at")).where(
        Submission.user_id == user.id,
        Submission.lab_id == lab.id,
        Submission.created_at > since,
    )
    credited = (
        select(Submission.created_at.label("at"))
        .join(SubmissionCredit, SubmissionCredit.submission_id == Submission.id)
        .where(
            SubmissionCredit.user_id == user.id,
            Submission.lab_id == lab.id,
            Submission.created_at > since,
        )
    )
    times = union_all(authored, credited).subquery()
    used, oldest = session.execute(select(func.count(), func.min(times.c.at))).one()
    reset_at = None
    if oldest is not None:
        # func.min bypasses the column type on some backends; put the zone back if it is gone.
        if isinstance(oldest, str):
            oldest = datetime.fromisoformat(oldest)
        if oldest.tzinfo is None:
            oldest = oldest.replace(tzinfo=now.tzinfo)
        reset_at = oldest + timedelta(seconds=window)
    return Quota(limit=limit, used=int(used), window_seconds=window, reset_at=reset_at)


def enforce_submission_quota(session: Session, *, user: User, lab: Lab, now: datetime) -> Quota:
    """Return the quota before this submission; raise RateLimited when none is left."""
    quota = submission_quota(session, user=user, lab=lab, now=now)
    if quota.remaining == 0:
        wait = quota.seconds_to_reset(now)
        raise RateLimited(
            f"You have made {quota.used} submissions to {lab.slug} in the last "
            f"{_duration(quota.window_seconds)}, the most allowed; submit again in "
            f"{_duration(wait)}. Test locally in the meantime.",
            retry_after=wait,
        )
    return quota
