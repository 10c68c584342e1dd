"""What the API shows of rubric items and points."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class RubricItemCreate(BaseModel):
    title: str
    max_points: float = Field(gt=0)
    description: str = ""


class RubricItemUpdate(BaseModel):
    """What changes (a field left out is kept)."""

    title: str | None = None
    max_points: float | None = Field(None, gt=0)
    description: str | None = None


class RubricItemRead(BaseModel):
    id: int
    title: str
    description: str
    max_points: float
    comments: list[str] = []


class RubricCommentCreate(BaseModel):
    text: str


class RubricScoreSet(BaseModel):
    item: int
    points: float | None = Field(description="null clears the item's points")
    comment: str = ""


class RubricGradesSet(BaseModel):
    scores: list[RubricScoreSet]


class RubricScoreRead(BaseModel):
    item: int
    title: str
    max_points: float
    points: float | None
    comment: str
    updated_at: datetime | None


class RubricGradesRead(BaseModel):
    student: str
    released: bool
    total: float | None
    scores: list[RubricScoreRead]
