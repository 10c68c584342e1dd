"""The similarity reports' pages (staff only): a lab's reports and asking for one, a pair side
by side, and linking a course's earlier offerings.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.errors import Invalid
from app.courses.models import Course
from app.courses.service import find_lab, require_staff
from app.similarity import offerings
from app.similarity import service as similarity
from app.users.models import User
from app.web.deps import RowId, WebDb
from app.web.forms import back_to
from app.web.templating import check_csrf, render

router = APIRouter(include_in_schema=False)


@router.get("/courses/{course}/labs/{lab}/similarity", response_class=HTMLResponse)
async def similarity_page(
    request: Request, course: str, lab: str, web: WebDb, message: str = ""
) -> Response:
    def page(session: Session, user: User) -> Response:
        found, row = find_lab(session, course=course, lab=lab)
        require_staff(session, user=user, course=found)
        reports = similarity.reports_of(session, lab=row)
        latest = next((r for r in reports if r.state == "done"), None)
        return render(
            request,
            "similarity.html",
            {
                "course": found,
                "lab": row,
                "reports": reports,
                "latest": latest,
                "pairs": similarity.pairs_of(session, report=latest) if latest else [],
                "copies": similarity.reference_copies_of(session, report=latest) if latest else [],
                "offerings": offerings.links_of(session, course=found, user=user),
                # The page words the state of a report in the making from the database, not
                # from the address it was sent to: a reload shows where it is now.
                "busy": next((r for r in reports if r.state in ("queued", "running")), None),
                "message": message[:300],
            },
        )

    return await web.run(page)


@router.post("/courses/{course}/labs/{lab}/similarity", response_class=HTMLResponse)
async def similarity_form(
    request: Request,
    course: str,
    lab: str,
    web: WebDb,
    include_past: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found, row = find_lab(session, course=course, lab=lab)
        similarity.request_report(
            session, course=found, lab=row, user=user, include_past=bool(include_past), now=utcnow()
        )
        # No sentence in the address: the page says the report's state as it stands.
        return RedirectResponse(f"/courses/{found.slug}/labs/{row.slug}/similarity", 303)

    return await web.run(work)


@router.post("/courses/{course}/earlier-offerings", response_class=HTMLResponse)
async def earlier_offerings_form(
    request: Request,
    course: str,
    web: WebDb,
    action: Annotated[str, Form()] = "",
    other: Annotated[str, Form()] = "",
    back: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Link an earlier offering (an instructor of both), or remove a link (staff of either)."""

    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found, row = find_lab(session, course=course, lab=back)
        if action == "link":
            link = offerings.link_earlier(
                session, course=found, earlier_slug=other, user=user, now=utcnow()
            )
            said = f"{session.get_one(Course, link.earlier_course_id).slug} is linked as an "
            said += f"earlier offering of {found.slug}."
        elif action == "unlink":
            gone = offerings.unlink(session, course=found, other_slug=other, user=user)
            said = f"The link with {other} is removed." if gone else f"{other} was not linked."
        else:
            raise Invalid("That is not something this page does; reload it.")
        return back_to(f"/courses/{found.slug}/labs/{row.slug}/similarity", said)

    return await web.run(work)


@router.get("/similarity/{report_id}/pairs/{rank}", response_class=HTMLResponse)
async def similarity_pair_page(
    request: Request, report_id: RowId, rank: int, web: WebDb
) -> Response:
    def page(session: Session, user: User) -> Response:
        report, lab = similarity.get_report(session, user=user, report_id=report_id)
        view = similarity.pair_view(session, report=report, rank=rank)
        return render(
            request,
            "similarity_pair.html",
            {
                "v": view,
                "report": report,
                "lab": lab,
                "course": session.get_one(Course, lab.course_id),
            },
        )

    return await web.run(page)
