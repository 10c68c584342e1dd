"""When a lab's grades are released: the one moment that hidden cases' details, rubric points
and the regrade-request window all go by.

The staff may release a lab's grades at a time they choose (`Lab.grades_released_at`, now or
later). Without that, grades are released once nobody can hand in work for the lab any more
without an extension: the lab's due date, plus its late-day cap where the course gives late
days. A lab without a due date is released only by the staff.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from app.courses.models import Course, Lab


def late_day_cap(course: Course, lab: Lab) -> int:
    """The most late days one student may spend on this lab (0 where the course gives none)."""
    if course.late_days <= 0:
        return 0
    cap = lab.late_day_cap if lab.late_day_cap is not None else course.late_day_cap
    return course.late_days if cap is None else max(0, min(cap, course.late_days))


def released_at(course: Course, lab: Lab) -> datetime | None:
    if lab.grades_released_at is not None:
        return lab.grades_released_at
    if lab.due_at is None:
        return None
    return lab.due_at + timedelta(days=late_day_cap(course, lab))


def is_released(course: Course, lab: Lab, *, now: datetime) -> bool:
    at = released_at(course, lab)
    return at is not None and now >= at


def regrade_requests_close_at(course: Course, lab: Lab) -> datetime | None:
    """When the window for regrade requests closes (None: it is open until a release)."""
    at = released_at(course, lab)
    return None if at is None else at + timedelta(days=course.regrade_window_days)
