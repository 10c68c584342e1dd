"""What the API shows of regrade requests."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from app.regrades.service import RequestRow


class RegradeAsk(BaseModel):
    text: str = Field(description="what looks wrong, in a few sentences (at most 2000 characters)")
    case: str = Field("", description="the test case it is about; empty: the whole submission")


class RegradeAnswer(BaseModel):
    decision: Literal["regrade", "adjust", "decline"]
    answer: str = Field(description="the answer the student reads (the reason, for points)")
    points: float | None = Field(None, description="for adjust: points to add (negative: take)")


class RegradeEventRead(BaseModel):
    at: datetime
    by: str
    action: str
    text: str
    points: float | None


class RegradeRequestRead(BaseModel):
    id: int
    url: str
    lab: str
    submission: int
    student: str
    case: str
    text: str
    state: str
    outcome: str
    answer: str
    points: float | None
    answered_by: str | None
    created_at: datetime
    answered_at: datetime | None
    history: list[RegradeEventRead]


def request_read(row: RequestRow) -> RegradeRequestRead:
    r = row.request
    return RegradeRequestRead(
        id=r.id,
        url=f"/regrade-requests/{r.id}",
        lab=row.lab.slug,
        submission=r.submission_id,
        student=row.student.email,
        case=r.case_name,
        text=r.text,
        state=r.state,
        outcome=r.outcome,
        answer=r.answer,
        points=r.points,
        answered_by=row.answered_by.email if row.answered_by else None,
        created_at=r.created_at,
        answered_at=r.answered_at,
        history=[
            RegradeEventRead(at=e.at, by=by, action=e.action, text=e.text, points=e.points)
            for e, by in row.events
        ],
    )
