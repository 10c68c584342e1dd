"""The gradebook's pages: the home page and a course's page (each lab, and a student's counted
score in it; instructors order the labs there), the staff's gradebook, and their roster of one
lab. As every page, a handler's database work (rendering included) is one function handed to
`web.run` (app.web.deps).
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import Markup
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.deadlines import deadline_for, lab_state
from app.courses.lifecycle import may_create_courses
from app.courses.release import is_released
from app.courses.service import (
    courses_of,
    find_lab,
    get_course,
    get_lab,
    labs_of,
    move_lab,
    require_instructor,
    require_member,
    require_staff,
)
from app.gradebook.lab_roster import STATUS_FILTERS, StudentRow, kernel_time_groups, lab_roster
from app.gradebook.service import gradebook
from app.latedays.service import balance, grace_days
from app.policy.counting import best_scores
from app.rubric.service import points_possible
from app.submissions.service import background_waiting
from app.teams.service import open_invitations
from app.users.models import User
from app.web.charts import histogram, linear_bins, log_bins
from app.web.deps import WebDb
from app.web.forms import form_flag
from app.web.templating import check_csrf, render

router = APIRouter(include_in_schema=False)


@router.get("/courses/{course}", response_class=HTMLResponse)
async def course_page(request: Request, course: str, web: WebDb, message: str = "") -> Response:
    def page(session: Session, user: User) -> Response:
        found = get_course(session, slug=course)
        role = require_member(session, user=user, course=found)
        labs = labs_of(session, course=found)
        now = utcnow()
        # Rubric points count on a student's page once their lab's grades are released.
        shown = {lab.id for lab in labs if role.is_staff or is_released(found, lab, now=now)}
        scores = best_scores(session, user=user, labs=labs, rubric=shown)
        most = points_possible(session, labs=labs)
        rows = []
        for lab in labs:
            deadline = deadline_for(session, lab=lab, user_id=user.id)
            rows.append(
                {
                    "lab": lab,
                    "cell": scores[lab.id],
                    "most": most[lab.id],
                    "deadline": deadline,
                    "state": lab_state(
                        lab,
                        deadline,
                        now=now,
                        staff=role.is_staff,
                        late_days=grace_days(
                            session,
                            course=found,
                            lab=lab,
                            user_id=user.id,
                            deadline=deadline,
                            now=now,
                        ),
                    ),
                }
            )
        archived = labs_of(session, course=found, archived=True) if role.is_staff else []
        left = balance(session, course=found, user_id=user.id).left if found.late_days else 0
        return render(
            request,
            "course.html",
            {
                "course": found,
                "role": role,
                "rows": rows,
                "archived": archived,
                "now": now,
                "message": message[:300],
                "late_days_left": left,
                "invitations": (
                    [] if role.is_staff else open_invitations(session, course=found, user=user)
                ),
            },
        )

    return await web.run(page)


@router.get("/courses/{course}/gradebook", response_class=HTMLResponse)
async def gradebook_page(request: Request, course: str, web: WebDb) -> Response:
    def page(session: Session, user: User) -> Response:
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        labs, rows = gradebook(session, course=found)
        most = points_possible(session, labs=labs)
        return render(
            request,
            "gradebook.html",
            {
                "course": found,
                "labs": labs,
                "rows": rows,
                "most": most,
                "total_max": sum(most.values()),
            },
        )

    return await web.run(page)


@router.get("/courses/{course}/labs/{lab}/students", response_class=HTMLResponse)
async def lab_students_page(
    request: Request,
    course: str,
    lab: str,
    web: WebDb,
    status: str = "",
    late: str = "",
    extension: str = "",
    q: str = "",
    message: str = "",
) -> Response:
    def page(session: Session, user: User) -> Response:
        found, row = find_lab(session, course=course, lab=lab)
        require_staff(session, user=user, course=found)
        most = points_possible(session, labs=[row])[row.id]
        # The histograms show the whole class; the filters narrow the table only.
        everyone = lab_roster(session, lab=row)
        rows = lab_roster(
            session,
            lab=row,
            status=status or None,
            late=form_flag(late),
            extension=form_flag(extension),
            query=q or None,
        )
        return render(
            request,
            "lab_students.html",
            {
                "course": found,
                "lab": row,
                "most": most,
                "rows": rows,
                "charts": lab_charts(most, everyone),
                "status_filters": STATUS_FILTERS,
                "filters": {"status": status, "late": late, "extension": extension, "q": q},
                "waiting": background_waiting(session, lab=row),
                "message": message[:300],
                "error": None,
            },
        )

    return await web.run(page)


def lab_charts(most: float, rows: list[StudentRow]) -> dict[str, Markup | list[tuple[str, Markup]]]:
    """`most`: the lab's maximum (app.rubric.service.points_possible)."""
    scores = [r.cell.score for r in rows if r.cell.score is not None]
    top = most or max(scores, default=1.0) or 1.0
    charts: dict[str, Markup | list[tuple[str, Markup]]] = {
        "scores": histogram(
            linear_bins(scores, low=0.0, high=top, count=10),
            title=f"Counted scores of {len(scores)} students",
            x_label=f"counted score (0 to {top:g})",
        )
    }
    charts["times"] = [
        (
            model,
            histogram(
                log_bins(times),
                title=f"Kernel times of the counted submissions on {model}",
                x_label=f"median time on the timed case, ms, log scale ({len(times)} on {model})",
            ),
        )
        for model, times in kernel_time_groups(rows)
    ]
    return charts


@router.get("/", response_class=HTMLResponse)
async def home(request: Request, web: WebDb) -> Response:
    def page(session: Session, user: User) -> Response:
        courses = courses_of(session, user=user)
        # Archived courses are listed apart, for their staff only (to open or restore one).
        archived = [
            (course, role)
            for course, role in courses_of(session, user=user, archived=True)
            if role.is_staff
        ]
        may_create = may_create_courses(session, user=user)
        # Straight to the one course, for someone with nothing else to do on this page.
        if len(courses) == 1 and not archived and not may_create:
            return RedirectResponse(f"/courses/{courses[0][0].slug}", status_code=303)
        return render(
            request,
            "home.html",
            {
                "courses": courses,
                "archived": archived,
                "may_create": may_create,
            },
        )

    return await web.run(page)


@router.post("/courses/{course}/labs/{lab}/move")
async def move_lab_form(
    request: Request,
    course: str,
    lab: str,
    web: WebDb,
    by: Annotated[int, Form(ge=-1000, le=1000)],
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Instructors: move a lab up (by=-1) or down (by=1) in the course's list."""

    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        require_instructor(session, user=user, course=found)
        row = get_lab(session, course=found, slug=lab)
        moved = move_lab(session, lab=row, by=by)
        where = "up" if by < 0 else "down"
        text = f"Moved {row.title} {where}." if moved else f"{row.title} is already at that end."
        return RedirectResponse(
            f"/courses/{found.slug}?message={quote(text)}#lab-{row.slug}", status_code=303
        )

    return await web.run(work)
