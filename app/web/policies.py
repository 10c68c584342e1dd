"""Pages for a course's policies (issue 20): a lab's teams, late days, and a lab's team size,
late-day cap, late penalty and release of grades.

As every page, a handler's database work (rendering included) is one function handed to
`web.run` (app.web.deps); a form that fails renders its page again with the sentence.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.errors import DomainError, Invalid
from app.courses.models import Course, Lab
from app.courses.release import late_day_cap, released_at
from app.courses.service import (
    find_lab,
    get_course,
    labs_of,
    require_instructor,
    require_member,
    require_staff,
)
from app.latedays import service as latedays
from app.policy.recount import recount_after_change, recount_state
from app.policy.rules import update_lab_policies
from app.policy.settle import adjust
from app.teams import service as teams
from app.users.models import User
from app.users.service import get_user
from app.web.deps import WebDb
from app.web.forms import back_to, form_time, refused, whole_number
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
            return refused(
                request,
                session,
                exc,
                "teams.html",
                lambda: _teams_context(session, user, found, row),
            )
        return back_to(f"/courses/{found.slug}/labs/{row.slug}/teams", said)

    return await web.run(work)


def _late_days_context(session: Session, user: User, found: Course) -> dict[str, object]:
    role = require_member(session, user=user, course=found)
    labs = labs_of(session, course=found)
    context: dict[str, object] = {
        "course": found,
        "role": role,
        "caps": {lab.slug: late_day_cap(found, lab) for lab in labs},
        "message": "",
        "error": None,
    }
    context["recount"] = recount_state(session, course=found)
    if role.is_staff:
        context["rows"] = latedays.balances(session, course=found)
    else:
        context["balance"] = latedays.balance(session, course=found, user_id=user.id)
        context["uses"] = latedays.uses(session, course=found, user_id=user.id)
        context["history"] = latedays.history(session, course=found, user_id=user.id)
    return context


@router.get("/courses/{course}/late-days", response_class=HTMLResponse)
async def late_days_page(request: Request, course: str, web: WebDb, message: str = "") -> Response:
    def page(session: Session, user: User) -> Response:
        context = _late_days_context(session, user, get_course(session, slug=course))
        context["message"] = message[:300]
        return render(request, "late_days.html", context)

    return await web.run(page)


@router.post("/courses/{course}/late-days", response_class=HTMLResponse)
async def late_days_form(
    request: Request,
    course: str,
    web: WebDb,
    action: Annotated[str, Form()],
    csrf_token: Annotated[str, Form()] = "",
    email: Annotated[str, Form()] = "",
    days: Annotated[str, Form()] = "",
    reason: Annotated[str, Form()] = "",
    cap: Annotated[str, Form()] = "",
    regrade_window: Annotated[str, Form()] = "",
) -> Response:
    """Staff adjust a student's late days; instructors set the course's budget and cap."""

    def work(session: Session, user: User) -> Response:
        from app.api.latedays import set_regrade_window

        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        try:
            if action == "adjust":
                require_staff(session, user=user, course=found)
                left = adjust(
                    session,
                    course=found,
                    student=get_user(session, email=email),
                    delta=whole_number(days, "Days"),
                    reason=reason,
                    by=user,
                    now=utcnow(),
                ).left
                said = f"{email} now has {left} late day{'s' if left != 1 else ''} left."
            elif action == "budget":
                require_instructor(session, user=user, course=found)
                changes = set_regrade_window(found, whole_number(regrade_window, "Regrade window"))
                changes += latedays.set_budget(
                    session,
                    course=found,
                    days=whole_number(days, "Late days"),
                    cap=None if not cap.strip() else whole_number(cap, "Cap"),
                    now=utcnow(),
                )
                said = ("Saved: " + "; ".join(changes) + ".") if changes else "Nothing changed."
                # Committed first; then late days are settled again in short transactions.
                session.commit()
                if found.late_days_recount_at is not None:
                    recount_after_change(found.id)
            else:
                raise Invalid("That is not something this page does; reload it.")
        except DomainError as exc:
            return refused(
                request,
                session,
                exc,
                "late_days.html",
                lambda: _late_days_context(session, user, found),
            )
        return back_to(f"/courses/{found.slug}/late-days", said)

    return await web.run(work)


@router.post("/courses/{course}/labs/{lab}/policies", response_class=HTMLResponse)
async def lab_policies_form(
    request: Request,
    course: str,
    lab: str,
    web: WebDb,
    csrf_token: Annotated[str, Form()] = "",
    team_size: Annotated[str, Form()] = "1",
    late_day_cap: Annotated[str, Form()] = "",
    late_penalty: Annotated[str, Form()] = "0",
    grades_released_at: Annotated[str, Form()] = "",
    release_now: Annotated[str, Form()] = "",
) -> Response:
    """Instructors: a lab's team size, late-day cap, late penalty and release of grades."""

    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found, row = find_lab(session, course=course, lab=lab)
        back = f"/courses/{found.slug}/labs/{row.slug}/settings"
        try:
            require_instructor(session, user=user, course=found)
            try:
                penalty = float(late_penalty.strip() or "0")
            except ValueError:
                raise Invalid(f"The late penalty must be a number, not {late_penalty!r}.") from None
            released = utcnow() if release_now else form_time(grades_released_at, "Grades released")
            changes = update_lab_policies(
                session,
                lab=row,
                now=utcnow(),
                team_size=whole_number(team_size, "Team size"),
                late_day_cap=whole_number(late_day_cap, "Late-day cap")
                if late_day_cap.strip()
                else None,
                late_penalty=penalty,
                grades_released_at=released,
            )
        except DomainError as exc:
            session.rollback()
            page = {
                "course": found,
                "lab": row,
                "can_edit": True,
                "message": "",
                "error": exc.message,
                "released_at": released_at(found, row),
            }
            return render(request, "lab_settings.html", page, status_code=exc.status_code)
        return back_to(
            back, ("Saved: " + "; ".join(changes) + ".") if changes else "Nothing changed."
        )

    return await web.run(work)
