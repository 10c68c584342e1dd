"""The performance feature's API: a lab's leaderboard, joining and leaving it."""

from __future__ import annotations

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from app.api.errors import COURSE, errors
from app.courses.service import (
    find_lab,
    require_member,
)
from app.performance.leaderboard import join_leaderboard, leaderboard, leave_leaderboard
from app.users.models import User
from app.web.deps import ApiDb

router = APIRouter(prefix="/api/v1")


class LeaderboardPlace(BaseModel):
    rank: int
    pseudonym: str
    median_ms: float
    you: bool


class LeaderboardRead(BaseModel):
    gpu: str
    places: list[LeaderboardPlace]


class LeaderboardJoin(BaseModel):
    pseudonym: str = Field(description="3 to 24 letters, digits, spaces, dots or hyphens")


@router.get(
    "/courses/{course}/labs/{lab}/leaderboard", tags=["leaderboard"], responses=errors(*COURSE)
)
async def get_leaderboard(course: str, lab: str, api: ApiDb) -> list[LeaderboardRead]:
    """Members: per GPU model, the opted-in students' fastest fully correct submissions, by
    the timed case's median."""

    def work(session: Session, user: User) -> list[LeaderboardRead]:
        found, row = find_lab(session, course=course, lab=lab)
        require_member(session, user=user, course=found)
        return [
            LeaderboardRead(
                gpu=board.gpu_model,
                places=[
                    LeaderboardPlace(
                        rank=p.rank, pseudonym=p.pseudonym, median_ms=p.median_ms, you=p.is_you
                    )
                    for p in board.places
                ],
            )
            for board in leaderboard(session, lab=row, viewer_id=user.id)
        ]

    return await api.run(work)


@router.put(
    "/courses/{course}/labs/{lab}/leaderboard/me",
    tags=["leaderboard"],
    responses=errors(401, 403, 404, 409, 503),
)
async def join_lab_leaderboard(
    course: str, lab: str, body: LeaderboardJoin, api: ApiDb
) -> LeaderboardJoin:
    """Students: appear on the lab's leaderboard under a pseudonym (or change it)."""

    def work(session: Session, user: User) -> LeaderboardJoin:
        found, row = find_lab(session, course=course, lab=lab)
        entry = join_leaderboard(
            session, course=found, lab=row, user=user, pseudonym=body.pseudonym
        )
        return LeaderboardJoin(pseudonym=entry.pseudonym)

    return await api.run(work)


@router.delete(
    "/courses/{course}/labs/{lab}/leaderboard/me",
    status_code=204,
    tags=["leaderboard"],
    responses=errors(*COURSE),
)
async def leave_lab_leaderboard(course: str, lab: str, api: ApiDb) -> Response:
    """Students: leave the lab's leaderboard."""

    def work(session: Session, user: User) -> Response:
        found, row = find_lab(session, course=course, lab=lab)
        require_member(session, user=user, course=found)
        leave_leaderboard(session, lab=row, user=user)
        return Response(status_code=204)

    return await api.run(work)
