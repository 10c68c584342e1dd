"""REST endpoints for teams: the staff form them (one by one or from a roster), students start
one, invite, accept and leave. As everywhere in the API, a handler's database work is one
function handed to `api.run`."""

from __future__ import annotations

from fastapi import APIRouter, Response
from sqlalchemy.orm import Session

from app.api.errors import COURSE, errors
from app.core.database import utcnow
from app.core.errors import NotFound
from app.courses.models import Lab
from app.courses.service import find_lab, require_member, require_staff
from app.teams import service as teams
from app.teams.schemas import (
    InviteAnswer,
    InviteCreate,
    InviteRead,
    MyTeam,
    TeamRead,
    TeamRoster,
    TeamSet,
    TeamStart,
    team_read,
)
from app.users.models import User
from app.users.service import get_user
from app.web.deps import ApiDb, RowId

router = APIRouter(prefix="/api/v1", tags=["teams"], responses=errors(*COURSE))


def _view(session: Session, lab: Lab, name: str) -> TeamRead:
    for view in teams.teams_of(session, lab=lab):
        if view.team.name == name:
            return team_read(view, lab.team_size)
    raise NotFound(f"{lab.slug} has no team called {name}.")


def _mine(session: Session, lab: Lab, user: User) -> MyTeam:
    team = teams.team_of(session, lab=lab, user_id=user.id)
    invitations = [
        InviteRead(id=inv.id, team=team_row.name, invited=user.email, created_at=inv.created_at)
        for inv, team_row in teams.invitations_for(session, lab=lab, user=user)
    ]
    return MyTeam(
        team=_view(session, lab, team.name) if team is not None else None,
        invitations=invitations,
    )


@router.get("/courses/{course}/labs/{lab}/teams")
async def list_teams(course: str, lab: str, api: ApiDb) -> list[TeamRead]:
    """Staff: every team of the lab with its members and open invitations."""

    def work(session: Session, user: User) -> list[TeamRead]:
        found, row = find_lab(session, course=course, lab=lab)
        require_staff(session, user=user, course=found)
        return [team_read(v, row.team_size) for v in teams.teams_of(session, lab=row)]

    return await api.run(work)


@router.put("/courses/{course}/labs/{lab}/teams/{name}")
async def set_team(course: str, lab: str, name: str, body: TeamSet, api: ApiDb) -> TeamRead:
    """Staff: make the team, or set its members (members left out leave; students in another
    team of the lab move). Submissions made before keep their credit."""

    def work(session: Session, user: User) -> TeamRead:
        found, row = find_lab(session, course=course, lab=lab)
        require_staff(session, user=user, course=found)
        team = teams.form_team(
            session, course=found, lab=row, name=name, emails=body.members, by=user, now=utcnow()
        )
        return _view(session, row, team.name)

    return await api.run(work)


@router.post("/courses/{course}/labs/{lab}/teams/import")
async def import_teams(course: str, lab: str, body: TeamRoster, api: ApiDb) -> list[TeamRead]:
    """Staff: teams from a CSV roster (team,email); one bad line changes nothing."""

    def work(session: Session, user: User) -> list[TeamRead]:
        found, row = find_lab(session, course=course, lab=lab)
        require_staff(session, user=user, course=found)
        made = teams.import_teams(
            session, course=found, lab=row, text=body.roster, by=user, now=utcnow()
        )
        return [_view(session, row, t.name) for t in made]

    return await api.run(work)


@router.delete("/courses/{course}/labs/{lab}/teams/{name}/members/{email}", status_code=204)
async def remove_team_member(course: str, lab: str, name: str, email: str, api: ApiDb) -> Response:
    """Staff: take a student out of a team; their earlier submissions keep their credit."""

    def work(session: Session, user: User) -> Response:
        found, row = find_lab(session, course=course, lab=lab)
        require_staff(session, user=user, course=found)
        student = get_user(session, email=email)
        held = teams.team_of(session, lab=row, user_id=student.id)
        if held is None or held.name != name:
            raise NotFound(f"{email} is not in the team {name} of {lab}.")
        teams.remove_member(session, lab=row, user=student, now=utcnow())
        return Response(status_code=204)

    return await api.run(work)


@router.get("/courses/{course}/labs/{lab}/team")
async def my_team(course: str, lab: str, api: ApiDb) -> MyTeam:
    """Students: my team of the lab, if any, and the invitations waiting for my answer."""

    def work(session: Session, user: User) -> MyTeam:
        found, row = find_lab(session, course=course, lab=lab)
        require_member(session, user=user, course=found)
        return _mine(session, row, user)

    return await api.run(work)


@router.post("/courses/{course}/labs/{lab}/team", status_code=201)
async def start_team(course: str, lab: str, body: TeamStart, api: ApiDb) -> MyTeam:
    """Students: start a team, with me as its first member."""

    def work(session: Session, user: User) -> MyTeam:
        found, row = find_lab(session, course=course, lab=lab)
        teams.start_team(session, course=found, lab=row, user=user, name=body.name, now=utcnow())
        return _mine(session, row, user)

    return await api.run(work)


@router.delete("/courses/{course}/labs/{lab}/team", status_code=204)
async def leave_team(course: str, lab: str, api: ApiDb) -> Response:
    """Students: leave my team; submissions made while I was in it still count for me."""

    def work(session: Session, user: User) -> Response:
        found, row = find_lab(session, course=course, lab=lab)
        require_member(session, user=user, course=found)
        if teams.remove_member(session, lab=row, user=user, now=utcnow()) is None:
            raise NotFound(f"You are not in a team for {lab}.")
        return Response(status_code=204)

    return await api.run(work)


@router.post("/courses/{course}/labs/{lab}/team/invites", status_code=201)
async def invite_to_team(course: str, lab: str, body: InviteCreate, api: ApiDb) -> InviteRead:
    """Students: invite another student of the course to my team."""

    def work(session: Session, user: User) -> InviteRead:
        found, row = find_lab(session, course=course, lab=lab)
        made = teams.invite(
            session, course=found, lab=row, user=user, email=body.email, now=utcnow()
        )
        team = session.get_one(teams.Team, made.team_id)
        guest = session.get_one(User, made.user_id)
        return InviteRead(
            id=made.id, team=team.name, invited=guest.email, created_at=made.created_at
        )

    return await api.run(work)


@router.post("/courses/{course}/labs/{lab}/team/invites/{invite_id}")
async def answer_invite(
    course: str, lab: str, invite_id: RowId, body: InviteAnswer, api: ApiDb
) -> MyTeam:
    """Students: accept or decline an invitation."""

    def work(session: Session, user: User) -> MyTeam:
        found, row = find_lab(session, course=course, lab=lab)
        require_member(session, user=user, course=found)
        teams.answer_invitation(
            session, lab=row, user=user, invite_id=invite_id, accept=body.accept, now=utcnow()
        )
        return _mine(session, row, user)

    return await api.run(work)
