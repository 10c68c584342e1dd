"""Staff pages of a course: the students of a lab, its settings, extensions, regrading a lab;
and the leaderboard, which every member sees.

As every page, a handler's database work (rendering included) is one function handed to
`web.run` (app.web.deps).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.errors import DomainError, Invalid
from app.core.timefmt import when_text
from app.courses.extensions import extensions_of
from app.courses.models import Course, Enrollment, Lab, LatePolicy, Role, ScorePolicy
from app.courses.release import released_at
from app.courses.service import (
    archive_lab,
    find_lab,
    get_course,
    get_lab,
    labs_of,
    require_instructor,
    require_member,
    require_staff,
    reread_lab,
    restore_lab,
)
from app.gradebook.lab_roster import STATUS_FILTERS, lab_roster
from app.grading.bulk import background_waiting, regrade_lab
from app.performance.leaderboard import join_leaderboard, leaderboard, leave_leaderboard, my_entry
from app.policy.rules import grant_extension, revoke_extension, update_lab
from app.users.models import User
from app.users.service import get_user
from app.web.deps import WebDb
from app.web.forms import back_to, form_flag, form_time, refused
from app.web.perf_charts import lab_charts
from app.web.templating import check_csrf, render

router = APIRouter(include_in_schema=False)


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
                "rows": rows,
                "charts": lab_charts(row, everyone),
                "status_filters": STATUS_FILTERS,
                "filters": {"status": status, "late": late, "extension": extension, "q": q},
                "waiting": background_waiting(session, lab=row),
                "message": message[:300],
                "error": None,
            },
        )

    return await web.run(page)


@router.post("/courses/{course}/labs/{lab}/regrade")
async def regrade_lab_form(
    request: Request,
    course: str,
    lab: str,
    web: WebDb,
    csrf_token: Annotated[str, Form()] = "",
    scope: Annotated[str, Form()] = "all",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found, row = find_lab(session, course=course, lab=lab)
        require_staff(session, user=user, course=found)
        result = regrade_lab(
            session,
            lab=row,
            requested_by=user.email,
            now=utcnow(),
            counted_only=scope == "counted",
        )
        skipped = f" ({result.skipped} were already waiting or grading)" if result.skipped else ""
        versions = f" {result.versions()}" if result.versions() else ""
        return back_to(
            f"/courses/{found.slug}/labs/{row.slug}/students",
            f"Queued {result.queued} submissions for a regrade{skipped}; they run behind new "
            f"uploads, a few at a time.{versions}",
        )

    return await web.run(work)


@router.get("/courses/{course}/labs/{lab}/settings", response_class=HTMLResponse)
async def lab_settings_page(
    request: Request, course: str, lab: str, web: WebDb, message: str = ""
) -> Response:
    def page(session: Session, user: User) -> Response:
        found, row = find_lab(session, course=course, lab=lab)
        role = require_staff(session, user=user, course=found)
        return render(
            request,
            "lab_settings.html",
            {
                "course": found,
                "lab": row,
                "can_edit": role is Role.instructor,
                "message": message[:300],
                "error": None,
                "released_at": released_at(found, row),
            },
        )

    return await web.run(page)


@router.post("/courses/{course}/labs/{lab}/settings", response_class=HTMLResponse)
async def lab_settings_form(
    request: Request,
    course: str,
    lab: str,
    web: WebDb,
    csrf_token: Annotated[str, Form()] = "",
    release_at: Annotated[str, Form()] = "",
    due_at: Annotated[str, Form()] = "",
    late_policy: Annotated[str, Form()] = "accept",
    score_policy: Annotated[str, Form()] = "best",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found, row = find_lab(session, course=course, lab=lab)
        require_instructor(session, user=user, course=found)
        try:
            # A changed lab folder is checked and read again first; if it fails, nothing is saved.
            changes = reread_lab(session, lab=row)
            changes += update_lab(
                session,
                lab=row,
                release_at=form_time(release_at, "Opens"),
                due_at=form_time(due_at, "Due"),
                late_policy=LatePolicy(late_policy),
                score_policy=ScorePolicy(score_policy),
            )
        except ValueError:
            session.rollback()
            changes = None
            error = "Choose accept or refuse, and best or last."
        except DomainError as exc:
            session.rollback()
            changes, error = None, exc.message
        if changes is None:
            page = {
                "course": found,
                "lab": row,
                "can_edit": True,
                "message": "",
                "error": error,
                "released_at": released_at(found, row),
            }
            return render(request, "lab_settings.html", page, status_code=422)
        text = ("Saved: " + "; ".join(changes) + ".") if changes else "Nothing changed."
        return back_to(f"/courses/{found.slug}/labs/{row.slug}/settings", text)

    return await web.run(work)


@router.post("/courses/{course}/labs/{lab}/remove")
async def lab_remove_form(
    request: Request,
    course: str,
    lab: str,
    web: WebDb,
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found, row = find_lab(session, course=course, lab=lab)
        require_instructor(session, user=user, course=found)
        archive_lab(session, lab=row, now=utcnow())
        return back_to(
            f"/courses/{found.slug}/labs/{row.slug}/settings",
            "Removed: students no longer see this lab; its submissions are kept.",
        )

    return await web.run(work)


@router.post("/courses/{course}/labs/{lab}/restore")
async def lab_restore_form(
    request: Request,
    course: str,
    lab: str,
    web: WebDb,
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found, row = find_lab(session, course=course, lab=lab)
        require_instructor(session, user=user, course=found)
        restore_lab(session, lab=row)
        return back_to(f"/courses/{found.slug}/labs/{row.slug}/settings", "Restored.")

    return await web.run(work)


def _extensions_context(session: Session, found: Course, lab: str, email: str) -> dict[str, object]:
    students = session.scalars(
        select(User)
        .join(Enrollment, Enrollment.user_id == User.id)
        .where(Enrollment.course_id == found.id, Enrollment.role == Role.student.value)
        .order_by(User.email)
    ).all()
    labs = labs_of(session, course=found)
    # Every lab is listed; one without a due date has nothing to extend, so it is shown but
    # cannot be picked, and the page says why (and where to give it one).
    chosen = next((row for row in labs if row.slug == lab), None)
    undated_choice = chosen if chosen is not None and chosen.due_at is None else None
    return {
        "course": found,
        "labs": labs,
        "extendable": [row for row in labs if row.due_at is not None],
        "students": students,
        "rows": extensions_of(session, course=found),
        # Preselected only when it can be extended: never another lab in its place.
        "chosen_lab": chosen.slug if chosen is not None and chosen.due_at is not None else "",
        "undated_choice": undated_choice,
        "chosen_email": email,
        "message": "",
        "error": None,
    }


@router.get("/courses/{course}/extensions", response_class=HTMLResponse)
async def extensions_page(
    request: Request,
    course: str,
    web: WebDb,
    lab: str = "",
    email: str = "",
    message: str = "",
) -> Response:
    def page(session: Session, user: User) -> Response:
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        context = _extensions_context(session, found, lab, email)
        context["message"] = message[:300]
        return render(request, "extensions.html", context)

    return await web.run(page)


@router.post("/courses/{course}/extensions", response_class=HTMLResponse)
async def grant_extension_form(
    request: Request,
    course: str,
    web: WebDb,
    lab: Annotated[str, Form()],
    email: Annotated[str, Form()],
    until: Annotated[str, Form()],
    note: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        try:
            due_at = form_time(until, "Until")
            if due_at is None:
                raise Invalid("Give the date and time the extension ends.")
            grant_extension(
                session,
                course=found,
                lab=get_lab(session, course=found, slug=lab),
                student=get_user(session, email=email),
                due_at=due_at,
                granted_by=user,
                note=note,
            )
        except DomainError as exc:
            return refused(
                request,
                session,
                exc,
                "extensions.html",
                lambda: _extensions_context(session, found, lab, email),
            )
        return back_to(
            f"/courses/{found.slug}/extensions",
            f"{email} may submit {lab} until {when_text(due_at)}.",
        )

    return await web.run(work)


@router.post("/courses/{course}/extensions/revoke")
async def revoke_extension_form(
    request: Request,
    course: str,
    web: WebDb,
    lab: Annotated[str, Form()],
    email: Annotated[str, Form()],
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        lab_row = get_lab(session, course=found, slug=lab)
        revoke_extension(session, lab=lab_row, student=get_user(session, email=email))
        return back_to(
            f"/courses/{found.slug}/extensions",
            f"Revoked the extension of {email} for {lab}; the lab's due date applies again.",
        )

    return await web.run(work)


def _leaderboard_context(
    session: Session, user: User, found: Course, row: Lab
) -> dict[str, object]:
    role = require_member(session, user=user, course=found)
    return {
        "course": found,
        "lab": row,
        "role": role,
        "entry": my_entry(session, lab=row, user=user),
        "boards": leaderboard(session, lab=row, viewer_id=user.id),
        "message": "",
        "error": None,
    }


@router.get("/courses/{course}/labs/{lab}/leaderboard", response_class=HTMLResponse)
async def leaderboard_page(
    request: Request, course: str, lab: str, web: WebDb, message: str = ""
) -> Response:
    def page(session: Session, user: User) -> Response:
        found, row = find_lab(session, course=course, lab=lab)
        context = _leaderboard_context(session, user, found, row)
        context["message"] = message[:300]
        return render(request, "leaderboard.html", context)

    return await web.run(page)


@router.post("/courses/{course}/labs/{lab}/leaderboard", response_class=HTMLResponse)
async def join_leaderboard_form(
    request: Request,
    course: str,
    lab: str,
    web: WebDb,
    pseudonym: Annotated[str, Form()],
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found, row = find_lab(session, course=course, lab=lab)
        try:
            entry = join_leaderboard(session, course=found, lab=row, user=user, pseudonym=pseudonym)
        except DomainError as exc:
            return refused(
                request,
                session,
                exc,
                "leaderboard.html",
                lambda: _leaderboard_context(session, user, found, row),
            )
        return back_to(
            f"/courses/{found.slug}/labs/{row.slug}/leaderboard",
            f"You are on the leaderboard as {entry.pseudonym}.",
        )

    return await web.run(work)


@router.post("/courses/{course}/labs/{lab}/leaderboard/leave")
async def leave_leaderboard_form(
    request: Request,
    course: str,
    lab: str,
    web: WebDb,
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found, row = find_lab(session, course=course, lab=lab)
        require_member(session, user=user, course=found)
        leave_leaderboard(session, lab=row, user=user)
        return back_to(
            f"/courses/{found.slug}/labs/{row.slug}/leaderboard", "You left the leaderboard."
        )

    return await web.run(work)
