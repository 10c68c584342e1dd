"""A lab's issue-20 policies: team size, late-day cap, late penalty, grades' release."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from app.core.errors import Invalid
from app.courses.models import Course, Lab
from app.courses.service import KEEP, Keep
from app.latedays.service import MAX_LATE_DAYS
from app.policy.settle import settle_lab
from app.teams.service import set_team_size


def update_lab_policies(
    session: Session,
    *,
    lab: Lab,
    now: datetime,
    team_size: int | None = None,
    late_day_cap: int | None | Keep = KEEP,
    late_penalty: float | None = None,
    grades_released_at: datetime | None | Keep = KEEP,
) -> list[str]:
    """Change them; a sentence per change. Late days are settled again where what they pay
    for moved (cap, penalty)."""
    changes = []
    if team_size is not None:
        said = set_team_size(lab, team_size)
        if said:
            changes.append(said)
    resettle = False
    if not isinstance(late_day_cap, Keep) and late_day_cap != lab.late_day_cap:
        if late_day_cap is not None and not (0 <= late_day_cap <= MAX_LATE_DAYS):
            raise Invalid(f"A lab's late-day cap is 0 to {MAX_LATE_DAYS} days, or none.")
        lab.late_day_cap = late_day_cap
        changes.append(
            f"takes at most {late_day_cap} late days"
            if late_day_cap is not None
            else "takes late days up to the course's cap"
        )
        resettle = True
    if late_penalty is not None and late_penalty != lab.late_penalty:
        if not (0 <= late_penalty <= 100):
            raise Invalid("A late penalty is 0 to 100 percent per late day; pick one in between.")
        lab.late_penalty = float(late_penalty)
        changes.append(f"loses {late_penalty:g}% per late day not covered")
    if not isinstance(grades_released_at, Keep) and grades_released_at != lab.grades_released_at:
        lab.grades_released_at = grades_released_at
        changes.append(
            f"releases its grades at {grades_released_at:%Y-%m-%d %H:%M} UTC"
            if grades_released_at is not None
            else "releases its grades at the default time (the due date and late-day cap)"
        )
    session.flush()
    if resettle:
        settle_lab(session, course=session.get_one(Course, lab.course_id), lab=lab, now=now)
    return changes
