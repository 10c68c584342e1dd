"""What the API shows of teams."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from app.teams.service import TeamView


class TeamRead(BaseModel):
    id: int
    name: str
    members: list[str]
    invited: list[str] = []
    size_limit: int
    created_at: datetime


class TeamSet(BaseModel):
    members: list[str] = Field(description="the students' emails; members left out leave")


class TeamRoster(BaseModel):
    roster: str = Field(description="CSV with the columns team,email (a line per member)")


class TeamStart(BaseModel):
    name: str = Field(description="1 to 60 letters, digits, spaces and . ' & + -")


class InviteCreate(BaseModel):
    email: str


class InviteRead(BaseModel):
    id: int
    team: str
    invited: str
    created_at: datetime


class InviteAnswer(BaseModel):
    accept: bool


class MyTeam(BaseModel):
    team: TeamRead | None
    invitations: list[InviteRead]


def team_read(view: TeamView, size_limit: int) -> TeamRead:
    return TeamRead(
        id=view.team.id,
        name=view.team.name,
        members=view.emails,
        invited=[u.email for u in view.invited],
        size_limit=size_limit,
        created_at=view.team.created_at,
    )
