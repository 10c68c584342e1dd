"""The regrade requests' pages: a student's form on a submission's page, a request's own page,
the staff's queue per lab; and the requests' parts of a submission's page and a lab's page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import Course, Lab
from app.courses.release import regrade_requests_close_at
from app.courses.service import find_lab
from app.regrades import service as regrades
from app.regrades.models import RegradeRequest
from app.submissions.models import Submission
from app.submissions.pages import lab_panels, submission_context, submission_panels
from app.submissions.schemas import SubmissionRead
from app.users.models import User
from app.web.deps import RowId, WebDb
from app.web.forms import PostedForm, a_number, back_to, posted
from app.web.templating import check_csrf, render

if TYPE_CHECKING:
    from graders.spec import LabSpec

router = APIRouter(include_in_schema=False)


@router.post("/submissions/{submission_id}/regrade-requests", response_class=HTMLResponse)
async def ask_regrade_form(
    request: Request,
    submission_id: RowId,
    web: WebDb,
    text: Annotated[str, Form()] = "",
    case: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    # The fields' ids on the submission's page start with "regrade-".
    form = PostedForm({"text": text, "case": case}, prefix="regrade-")

    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        made = form.attempt(
            lambda: regrades.ask(
                session, user=user, submission_id=submission_id, text=text, case=case, now=utcnow()
            )
        )
        if made is None:
            # The submission's page again, the student's words kept, the sentence at the top.
            return form.refused(
                request,
                session,
                "submission.html",
                lambda: submission_context(session, user, submission_id),
            )
        return RedirectResponse(f"/regrade-requests/{made.id}", status_code=303)

    return await web.run(work)


def _request_context(session: Session, user: User, request_id: int) -> dict[str, object]:
    row = regrades.get_request(session, user=user, request_id=request_id)
    return {
        "r": row,
        "course": session.get_one(Course, row.lab.course_id),
        "staff": row.student.id != user.id,
        "message": "",
        "error": None,
    }


@router.get("/regrade-requests/{request_id}", response_class=HTMLResponse)
async def regrade_request_page(
    request: Request, request_id: RowId, web: WebDb, message: str = ""
) -> Response:
    def page(session: Session, user: User) -> Response:
        context = _request_context(session, user, request_id)
        context["message"] = message[:300]
        return render(request, "regrade_request.html", context)

    return await web.run(page)


def _points(text: str) -> float | None:
    return a_number(text, "Points") if text.strip() else None


@router.post("/regrade-requests/{request_id}", response_class=HTMLResponse)
async def regrade_request_form(
    request: Request,
    request_id: RowId,
    web: WebDb,
    action: Annotated[str, Form()],
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Staff answer (regrade, adjust, decline); the student may withdraw."""
    form = await posted(request)

    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        said = ""
        if action == "withdraw":
            if form.attempt(
                lambda: regrades.withdraw(session, user=user, request_id=request_id, now=utcnow())
            ):
                said = "You withdrew the request."
        else:
            points = form.read("points", _points)
            if form.ok:
                # A regrade's job is sent once the request's work commits.
                answered = form.attempt(
                    lambda: regrades.answer(
                        session,
                        user=user,
                        request_id=request_id,
                        decision=action,
                        text=form.text("answer"),
                        points=points,
                        now=utcnow(),
                    )[0],
                    fields={"text": "answer"},
                )
                if answered is not None:
                    said = f"Request {request_id} is {answered.state}; the student sees the answer."
        if not form.ok:
            return form.refused(
                request,
                session,
                "regrade_request.html",
                lambda: _request_context(session, user, request_id),
            )
        return back_to(f"/regrade-requests/{request_id}", said)

    return await web.run(work)


@router.get("/courses/{course}/labs/{lab}/regrade-requests", response_class=HTMLResponse)
async def regrade_queue_page(
    request: Request, course: str, lab: str, web: WebDb, state: str = "open"
) -> Response:
    def page(session: Session, user: User) -> Response:
        found, row = find_lab(session, course=course, lab=lab)
        wanted = None if state == "all" else state
        rows = regrades.queue(session, user=user, course=found, lab=row, state=wanted)
        return render(
            request,
            "regrade_queue.html",
            {
                "course": found,
                "lab": row,
                "rows": rows,
                "state": state,
                "closes_at": regrade_requests_close_at(found, row),
            },
        )

    return await web.run(page)


@submission_panels.add
def regrade_context(
    session: Session,
    *,
    submission: Submission,
    view: SubmissionRead,
    spec: LabSpec,
    user: User,
    staff: bool,
) -> dict[str, object]:
    """For the submission page: its points adjustment, the requests about it, and whether its
    student may still ask (the window of its lab)."""
    lab = session.get_one(Lab, submission.lab_id)
    closes = regrades.window_closes_at(session, lab=lab)
    query = select(RegradeRequest).where(RegradeRequest.submission_id == submission.id)
    if not staff:
        query = query.where(RegradeRequest.user_id == user.id)
    requests = session.scalars(query.order_by(RegradeRequest.id)).all()
    return {
        "adjustment": submission.points_adjustment or 0.0,
        "regrade_requests": list(requests),
        "regrade_closes_at": closes,
        "regrade_open": not staff
        and submission.graded_at is not None
        and (closes is None or utcnow() < closes),
    }


@lab_panels.add
def lab_requests(
    session: Session, *, user: User, course: Course, lab: Lab, staff: bool
) -> dict[str, object]:
    """For the lab page: the staff's count of open requests; a student's own requests."""
    if staff:
        return {"open_requests": regrades.open_counts(session, lab_ids=[lab.id]).get(lab.id, 0)}
    return {"my_requests": regrades.mine(session, user=user, lab=lab)}
