"""The teams' pages: a lab's teams (the staff form them; students start one, invite and answer)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.errors import DomainError, Invalid
from app.courses.models import Course, Lab
from app.courses.service import (
    find_lab,
    require_member,
)
from app.teams import service as teams
from app.users.models import User
from app.users.service import get_user
from app.web.deps import WebDb
from app.web.forms import back_to, posted
from app.web.templating import check_csrf, render

router = APIRouter(include_in_schema=False)


def _teams_context(session: Session, user: User, found: Course, row: Lab) -> dict[str, object]:
    role = require_member(session, user=user, course=found)
    mine = None if role.is_staff else teams.team_of(session, lab=row, user_id=user.id)
    return {
        "course": found,
        "lab": row,
        "role": role,
        "teams": teams.teams_of(session, lab=row) if role.is_staff else [],
        "mine": next(
            (v for v in teams.teams_of(session, lab=row) if mine and v.team.id == mine.id), None
        ),
        "invitations": [] if role.is_staff else teams.invitations_for(session, lab=row, user=user),
        "closed": (
            []
            if role.is_staff
            else teams.closed_invitations(
                session, lab=row, user=user, since=utcnow() - teams.CLOSED_INVITATIONS_SHOWN
            )
        ),
        "message": "",
        "error": None,
    }


@router.get("/courses/{course}/labs/{lab}/teams", response_class=HTMLResponse)
async def teams_page(
    request: Request, course: str, lab: str, web: WebDb, message: str = ""
) -> Response:
    def page(session: Session, user: User) -> Response:
        found, row = find_lab(session, course=course, lab=lab)
        context = _teams_context(session, user, found, row)
        context["message"] = message[:300]
        return render(request, "teams.html", context)

    return await web.run(page)


@router.post("/courses/{course}/labs/{lab}/teams", response_class=HTMLResponse)
async def teams_form(
    request: Request,
    course: str,
    lab: str,
    web: WebDb,
    action: Annotated[str, Form()],
    csrf_token: Annotated[str, Form()] = "",
    name: Annotated[str, Form()] = "",
    members: Annotated[str, Form()] = "",
    roster: Annotated[str, Form()] = "",
    email: Annotated[str, Form()] = "",
    invite_id: Annotated[int, Form()] = 0,
) -> Response:
    """Every team action of the page, staff's and students', by its `action`."""
    # Several forms on one page share field names: each field's id starts with its action.
    form = await posted(request, prefix=f"{action}-")

    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found, row = find_lab(session, course=course, lab=lab)
        now = utcnow()
        try:
            role = require_member(session, user=user, course=found)
            if action in ("form", "import", "remove") and not role.is_staff:
                raise Invalid("Only the course's staff form teams for others.")
            if action == "form":
                emails = [e.strip() for e in members.replace(",", "\n").splitlines()]
                teams.form_team(
                    session, course=found, lab=row, name=name, emails=emails, by=user, now=now
                )
                said = f"Team {name.strip()} is set."
            elif action == "import":
                made = teams.import_teams(
                    session, course=found, lab=row, text=roster, by=user, now=now
                )
                said = f"Set {len(made)} team{'s' if len(made) != 1 else ''} from the roster."
            elif action == "remove":
                teams.remove_member(session, lab=row, user=get_user(session, email=email), now=now)
                said = f"{email} left their team; their earlier submissions keep their credit."
            elif action == "start":
                team = teams.start_team(
                    session, course=found, lab=row, user=user, name=name, now=now
                )
                said = f"You started the team {team.name}; invite the others."
            elif action == "invite":
                teams.invite(session, course=found, lab=row, user=user, email=email, now=now)
                said = f"Invited {email}; they accept on this page."
            elif action in ("accept", "decline"):
                team = teams.answer_invitation(
                    session,
                    lab=row,
                    user=user,
                    invite_id=invite_id,
                    accept=action == "accept",
                    now=now,
                )
                said = (
                    f"You joined {team.name}."
                    if action == "accept"
                    else f"You declined {team.name}'s invitation."
                )
            elif action == "leave":
                if teams.remove_member(session, lab=row, user=user, now=now) is None:
                    raise Invalid("You are not in a team for this lab.")
                said = "You left your team; what it submitted while you were in it still counts."
            else:
                raise Invalid("That is not something this page does; reload it.")
        except DomainError as exc:
            form.take(exc)
            return form.refused(
                request,
                session,
                "teams.html",
                lambda: _teams_context(session, user, found, row),
            )
        return back_to(f"/courses/{found.slug}/labs/{row.slug}/teams", said)

    return await web.run(work)
