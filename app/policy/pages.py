"""The pages of the rules that move what counts: a lab's settings (dates, policies, removing and
restoring it), students' extensions, a course's late days, and a lab's team size, late-day cap,
late penalty and release of grades. A form that fails renders its page again with the sentence.
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
from app.courses.models import Course, Enrollment, LatePolicy, Role, ScorePolicy
from app.courses.release import late_day_cap, released_at
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
from app.latedays import service as latedays
from app.policy.recount import recount_after_change, recount_state
from app.policy.rules import (
    grant_extension,
    revoke_extension,
    set_regrade_window,
    update_lab,
    update_lab_policies,
)
from app.policy.settle import adjust
from app.users.models import User
from app.users.service import get_user
from app.web.deps import WebDb
from app.web.forms import back_to, form_time, refused, whole_number
from app.web.templating import check_csrf, render

router = APIRouter(include_in_schema=False)


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
