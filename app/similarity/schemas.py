"""What the API shows of similarity reports (staff only)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel


class SimilarityAsk(BaseModel):
    include_past: bool = False


class SimilarityPairRead(BaseModel):
    rank: int
    a_submission: int
    b_submission: int
    a: str
    b: str
    a_similarity: float
    b_similarity: float
    overlap_tokens: int
    # A side from a course no longer (or never) linked as an earlier offering of this one:
    # its label and source are not shown.
    withheld: bool = False
    url: str


class ReferenceCopyRead(BaseModel):
    """A submission that is (nearly) one of the lab's reference kernels, listed on its own."""

    submission: int
    label: str
    reference: str  # the reference file's name
    share: float
    overlap_tokens: int


class SimilarityReportRead(BaseModel):
    id: int
    lab: str
    state: str
    include_past: bool
    created_at: datetime
    finished_at: datetime | None
    error: str
    stats: dict[str, Any]
    url: str
    pairs: list[SimilarityPairRead] = []
    reference_copies: list[ReferenceCopyRead] = []


class PassageRead(BaseModel):
    text: str
    shared: bool


class SimilarityPairDetail(SimilarityPairRead):
    a_passages: list[PassageRead]
    b_passages: list[PassageRead]


class EarlierOfferingRead(BaseModel):
    course: str  # the later course, whose reports compare with `earlier`
    earlier: str
    linked_by: str
    created_at: datetime
