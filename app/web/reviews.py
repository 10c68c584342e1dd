"""Pages where the staff look at students' work beyond the autograde (issue 20): regrade
requests (a student's form, the staff's queue per lab, a request's own page), rubric points,
and similarity reports (staff only, computed by a worker).

As every page, a handler's database work (rendering included) is one function handed to
`web.run` (app.web.deps).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.errors import DomainError, Invalid
from app.courses.models import Course, Enrollment, Lab, Role
from app.courses.release import is_released, regrade_requests_close_at
from app.courses.service import find_lab, require_staff
from app.grading.queue import stamp_send
from app.grading.sender import send_after_commit
from app.regrades import service as regrades
from app.regrades.models import RegradeRequest
from app.rubric import service as rubric
from app.similarity import offerings
from app.similarity import service as similarity
from app.submissions.models import Submission
from app.users.models import User
from app.users.service import find_user
from app.web.deps import RowId, WebDb
from app.web.forms import back_to, refused
from app.web.templating import check_csrf, render

router = APIRouter(include_in_schema=False)


# -- regrade requests ----------------------------------------------------------------------


@router.post("/submissions/{submission_id}/regrade-requests", response_class=HTMLResponse)
async def ask_regrade_form(
    request: Request,
    submission_id: RowId,
    web: WebDb,
    text: Annotated[str, Form()] = "",
    case: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        try:
            made = regrades.ask(
                session, user=user, submission_id=submission_id, text=text, case=case, now=utcnow()
            )
        except DomainError as exc:
            session.rollback()
            return render(
                request,
                "error.html",
                {"message": exc.message, "back": f"/submissions/{submission_id}"},
                status_code=exc.status_code,
            )
        return RedirectResponse(f"/regrade-requests/{made.id}", status_code=303)

    return await web.run(work)


@router.get("/regrade-requests/{request_id}", response_class=HTMLResponse)
async def regrade_request_page(
    request: Request, request_id: RowId, web: WebDb, message: str = ""
) -> Response:
    def page(session: Session, user: User) -> Response:
        row = regrades.get_request(session, user=user, request_id=request_id)
        course = session.get_one(Course, row.lab.course_id)
        staff = row.student.id != user.id
        return render(
            request,
            "regrade_request.html",
            {
                "r": row,
                "course": course,
                "staff": staff,
                "message": message[:300],
                "error": None,
            },
        )

    return await web.run(page)


@router.post("/regrade-requests/{request_id}", response_class=HTMLResponse)
async def regrade_request_form(
    request: Request,
    request_id: RowId,
    web: WebDb,
    action: Annotated[str, Form()],
    answer: Annotated[str, Form()] = "",
    points: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Staff answer (regrade, adjust, decline); the student may withdraw."""

    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        sent = None
        try:
            if action == "withdraw":
                regrades.withdraw(session, user=user, request_id=request_id, now=utcnow())
                said = "You withdrew the request."
            else:
                try:
                    value = float(points) if points.strip() else None
                except ValueError:
                    raise Invalid(f"Points must be a number, not {points!r}.") from None
                answered, job = regrades.answer(
                    session,
                    user=user,
                    request_id=request_id,
                    decision=action,
                    text=answer,
                    points=value,
                    now=utcnow(),
                )
                if job is not None:
                    stamp = stamp_send(job)
                    sent = (answered.submission_id, job.id, stamp)
                said = f"Request {request_id} is {answered.state}; the student sees the answer."
        except DomainError as exc:
            session.rollback()
            row = regrades.get_request(session, user=user, request_id=request_id)
            context = {
                "r": row,
                "course": session.get_one(Course, row.lab.course_id),
                "staff": row.student.id != user.id,
                "message": "",
                "error": exc.message,
            }
            return render(request, "regrade_request.html", context, status_code=exc.status_code)
        if sent is not None:
            session.commit()
            send_after_commit(submission_id=sent[0], job_id=sent[1], stamped_at=sent[2])
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


# -- rubric ----------------------------------------------------------------------------------


def _rubric_context(
    session: Session, user: User, found: Course, row: Lab, email: str
) -> dict[str, object]:
    role = require_staff(session, user=user, course=found)
    students = session.scalars(
        select(User)
        .join(Enrollment, Enrollment.user_id == User.id)
        .where(Enrollment.course_id == found.id, Enrollment.role == Role.student.value)
        .order_by(User.email)
    ).all()
    chosen = find_user(session, email=email) if email else None
    return {
        "course": found,
        "lab": row,
        "role": role,
        "items": rubric.items_of(session, lab=row),
        "comments": rubric.comments_of(session, lab=row),
        "students": students,
        "graded": rubric.graded_counts(session, lab=row),
        "chosen": chosen,
        "grades": rubric.grades_of(session, lab=row, user_id=chosen.id) if chosen else [],
        "released": is_released(found, row, now=utcnow()),
        "message": "",
        "error": None,
    }


@router.get("/courses/{course}/labs/{lab}/rubric", response_class=HTMLResponse)
async def rubric_page(
    request: Request, course: str, lab: str, web: WebDb, email: str = "", message: str = ""
) -> Response:
    def page(session: Session, user: User) -> Response:
        found, row = find_lab(session, course=course, lab=lab)
        context = _rubric_context(session, user, found, row, email)
        context["message"] = message[:300]
        return render(request, "rubric.html", context)

    return await web.run(page)


@router.post("/courses/{course}/labs/{lab}/rubric", response_class=HTMLResponse)
async def rubric_form(request: Request, course: str, lab: str, web: WebDb) -> Response:
    """Add an item (instructors), a reusable comment, or a student's points (staff). The form's
    fields are read as sent: one points and one comment field per item."""
    form = await request.form()
    fields = {k: str(v) for k, v in form.items()}

    def work(session: Session, user: User) -> Response:
        check_csrf(request, fields.get("csrf_token", ""))
        found, row = find_lab(session, course=course, lab=lab)
        email = fields.get("email", "")
        back = f"/courses/{found.slug}/labs/{row.slug}/rubric"
        try:
            role = require_staff(session, user=user, course=found)
            action = fields.get("action", "")
            if action == "item":
                if role is not Role.instructor:
                    raise Invalid("Only instructors add rubric items.")
                try:
                    worth = float(fields.get("max_points", ""))
                except ValueError:
                    raise Invalid("Give the item's points as a number.") from None
                item = rubric.add_item(
                    session,
                    lab=row,
                    title=fields.get("title", ""),
                    max_points=worth,
                    description=fields.get("description", ""),
                )
                said = f"Added {item.title} ({item.max_points:g} points)."
            elif action == "comment":
                item_id = int(fields.get("item", "0") or 0)
                item = rubric.get_item(session, lab=row, item_id=item_id)
                rubric.add_comment(session, item=item, text=fields.get("text", ""), by=user)
                said = f"Saved a reusable comment for {item.title}."
            elif action == "grade":
                student = find_user(session, email=email)
                if student is None:
                    raise Invalid("Choose a student to grade.")
                scores: dict[int, tuple[float | None, str]] = {}
                for item in rubric.items_of(session, lab=row):
                    raw = fields.get(f"points_{item.id}", "").strip()
                    comment = fields.get(f"comment_{item.id}", "").strip()
                    reuse = fields.get(f"reuse_{item.id}", "").strip()
                    if reuse:
                        comment = (reuse + ("\n" + comment if comment else "")).strip()
                    try:
                        points = float(raw) if raw else None
                    except ValueError:
                        raise Invalid(f"{item.title}: {raw!r} is not a number.") from None
                    scores[item.id] = (points, comment)
                rubric.grade(
                    session,
                    course=found,
                    lab=row,
                    student=student,
                    scores=scores,
                    by=user,
                    now=utcnow(),
                )
                said = f"Saved the rubric points of {student.email}."
                back += f"?email={student.email}"
                return RedirectResponse(f"{back}&message={said}", status_code=303)
            else:
                raise Invalid("That is not something this page does; reload it.")
        except DomainError as exc:
            return refused(
                request,
                session,
                exc,
                "rubric.html",
                lambda: _rubric_context(session, user, found, row, email),
            )
        return back_to(back, said)

    return await web.run(work)


# -- similarity --------------------------------------------------------------------------------


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
                "offerings": offerings.links_of(session, course=found, user=user),
                "busy": any(r.state in ("queued", "running") for r in reports),
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
        report = similarity.request_report(
            session, course=found, lab=row, user=user, include_past=bool(include_past), now=utcnow()
        )
        report_id = report.id
        session.commit()
        similarity.send_report(report_id)
        return back_to(
            f"/courses/{found.slug}/labs/{row.slug}/similarity",
            f"Report {report_id} is queued; a worker computes it (reload to see it).",
        )

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


def regrade_context(
    session: Session, *, submission: Submission, user: User, staff: bool
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


def lab_policy_context(
    session: Session, *, user: User, course: Course, lab: Lab, staff: bool
) -> dict[str, object]:
    """For the lab page: the staff's count of open requests; a student's team, rubric points
    (once released) and requests."""
    from app.teams.service import team_of

    if staff:
        return {"open_requests": regrades.open_counts(session, lab_ids=[lab.id]).get(lab.id, 0)}
    released = is_released(course, lab, now=utcnow())
    grades = rubric.grades_of(session, lab=lab, user_id=user.id) if released else []
    return {
        "my_team": team_of(session, lab=lab, user_id=user.id) if lab.team_size > 1 else None,
        "rubric_grades": grades,
        "my_requests": regrades.mine(session, user=user, lab=lab),
    }
