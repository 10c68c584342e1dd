"""What the API shows of late days and the course's policies."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class LateDayUse(BaseModel):
    lab: str
    submission: int | None
    days_late: int
    days_spent: int


class LateDayEventRead(BaseModel):
    at: datetime
    kind: str  # spend, refund, adjust, hold, release
    delta: int
    remaining_after: int
    lab: str | None
    reason: str


class LateDaysRead(BaseModel):
    student: str
    budget: int  # the course's, per student
    adjusted: int  # the staff's grants and deductions
    spent: int
    # Held by late uploads still being graded (spent if they count, back if they do not).
    held: int = 0
    left: int
    per_lab_cap: int | None
    labs: list[LateDayUse] = []
    history: list[LateDayEventRead] = []


class LateDayAdjust(BaseModel):
    days: int = Field(description="days to give (positive) or take away (negative)")
    reason: str = Field(description="why; the student sees it")


class CoursePolicies(BaseModel):
    """Fields to change; a field left out stays as it is."""

    late_days: int | None = Field(None, description="late days per student (0: none)")
    late_day_cap: int | None = Field(None, description="most late days on one lab; null: none")
    regrade_window_days: int | None = Field(
        None, description="days after a lab's grades are released that regrade requests close"
    )


class LateDaysRecountRead(BaseModel):
    """Every student's late days being settled again after a policy change, a few at a time."""

    since: datetime
    students_done: int
    students: int


class CoursePoliciesRead(BaseModel):
    course: str
    late_days: int
    late_day_cap: int | None
    regrade_window_days: int
    changes: list[str] = []
    # null once every student's late days follow the policy (a recount is under way otherwise)
    recount: LateDaysRecountRead | None = None
