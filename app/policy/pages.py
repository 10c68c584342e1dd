"""The pages of the rules that move what counts: a lab's settings (dates, policies, removing and
restoring it), students' extensions, a course's late days, and a lab's team size, late-day cap,
late penalty and release of grades. A form that fails renders its page again with the sentence.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Annotated, TypeVar

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.errors import Invalid
from app.core.timefmt import when_text
from app.courses.extensions import extensions_of
from app.courses.models import Course, Enrollment, Lab, LatePolicy, Role, ScorePolicy
from app.courses.release import late_day_cap, released_at
from app.courses.service import (
    KEEP,
    Keep,
    archive_lab,
    check_lab_dates,
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
from app.policy import panels  # noqa: F401  (its parts of the lab and submission pages)
from app.policy.recount import recount_after_change, recount_state
from app.policy.rules import (
    check_late_day_cap,
    check_late_penalty,
    grant_extension,
    revoke_extension,
    set_regrade_window,
    update_lab,
    update_lab_policies,
)
from app.policy.settle import adjust
from app.teams.service import check_team_size
from app.users.models import User
from app.users.service import get_user
from app.web.deps import WebDb
from app.web.forms import a_number, back_to, form_time, posted, whole_number
from app.web.templating import check_csrf, render

if TYPE_CHECKING:
    pass

router = APIRouter(include_in_schema=False)

T = TypeVar("T")
E = TypeVar("E", bound=Enum)


def _settings_context(found: Course, row: Lab, *, can_edit: bool) -> dict[str, object]:
    return {
        "course": found,
        "lab": row,
        "can_edit": can_edit,
        "message": "",
        "error": None,
        "released_at": released_at(found, row),
    }


@router.get("/courses/{course}/labs/{lab}/settings", response_class=HTMLResponse)
async def lab_settings_page(
    request: Request, course: str, lab: str, web: WebDb, message: str = ""
) -> Response:
    def page(session: Session, user: User) -> Response:
        found, row = find_lab(session, course=course, lab=lab)
        role = require_staff(session, user=user, course=found)
        context = _settings_context(found, row, can_edit=role is Role.instructor)
        context["message"] = message[:300]
        return render(request, "lab_settings.html", context)

    return await web.run(page)


def _choice(kind: type[E], sentence: str) -> Callable[[str], E]:
    def parse(text: str) -> E:
        try:
            return kind(text)
        except ValueError:
            raise Invalid(sentence) from None

    return parse


def _cap(text: str) -> int | None:
    return check_late_day_cap(whole_number(text, "Late-day cap")) if text.strip() else None


@router.post("/courses/{course}/labs/{lab}/settings", response_class=HTMLResponse)
async def lab_settings_form(
    request: Request,
    course: str,
    lab: str,
    web: WebDb,
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Instructors: the lab's one settings form, dates and policies, saved together. A field
    the post leaves out is kept as it is."""
    form = await posted(request)

    def read(name: str, parse: Callable[[str], T]) -> T | None | Keep:
        return form.read(name, parse) if name in form.values else KEEP

    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found, row = find_lab(session, course=course, lab=lab)
        require_instructor(session, user=user, course=found)
        release = read("release_at", lambda text: form_time(text, "Opens"))
        due = read("due_at", lambda text: form_time(text, "Due"))
        if "release_at" not in form.errors and "due_at" not in form.errors:
            form.attempt(
                lambda: check_lab_dates(
                    row.release_at if isinstance(release, Keep) else release,
                    row.due_at if isinstance(due, Keep) else due,
                )
            )
        late = read("late_policy", _choice(LatePolicy, "Choose accept or refuse late work."))
        score = read("score_policy", _choice(ScorePolicy, "Choose the best or the last."))
        team = read("team_size", lambda text: check_team_size(whole_number(text, "Team size")))
        cap = read("late_day_cap", _cap)
        penalty = read(
            "late_penalty", lambda text: check_late_penalty(a_number(text or "0", "Late penalty"))
        )
        released = read("grades_released_at", lambda text: form_time(text, "Grades released"))
        if form.text("release_now"):
            released = utcnow()
        if form.ok:
            # A changed lab folder is checked and read again first; if it fails, nothing is saved.
            changes = form.attempt(
                lambda: (
                    reread_lab(session, lab=row)
                    + update_lab(
                        session,
                        lab=row,
                        release_at=release,
                        due_at=due,
                        late_policy=None if isinstance(late, Keep) else late,
                        score_policy=None if isinstance(score, Keep) else score,
                    )
                    + update_lab_policies(
                        session,
                        lab=row,
                        now=utcnow(),
                        team_size=None if isinstance(team, Keep) else team,
                        late_day_cap=cap,
                        late_penalty=None if isinstance(penalty, Keep) else penalty,
                        grades_released_at=released,
                    )
                )
            )
        if not form.ok:
            return form.refused(
                request,
                session,
                "lab_settings.html",
                lambda: _settings_context(found, row, can_edit=True),
            )
        text = ("Saved: " + "; ".join(changes or []) + ".") if changes else "Nothing changed."
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


def _until(text: str) -> datetime:
    due_at = form_time(text, "Until")
    if due_at is None:
        raise Invalid("Give the date and time the extension ends.")
    return due_at


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
    form = await posted(request)

    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        lab_row = form.read("lab", lambda slug: get_lab(session, course=found, slug=slug))
        student = form.read("email", lambda address: get_user(session, email=address))
        due_at = form.read("until", _until)
        if lab_row is not None and student is not None and due_at is not None:
            form.attempt(
                lambda: grant_extension(
                    session,
                    course=found,
                    lab=lab_row,
                    student=student,
                    due_at=due_at,
                    granted_by=user,
                    note=note,
                ),
                fields={"student": "email", "due_at": "until"},
            )
        if not form.ok:
            return form.refused(
                request,
                session,
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
    reason: Annotated[str, Form()] = "",
) -> Response:
    """Staff adjust a student's late days; instructors set the course's budget and cap."""
    # Two forms on one page share field names: each field's id starts with its form's action.
    form = await posted(request, prefix=f"{action}-")

    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        said = ""
        if action == "adjust":
            require_staff(session, user=user, course=found)
            student = form.read("email", lambda address: get_user(session, email=address))
            delta = form.read("days", lambda text: whole_number(text, "Days"))
            if student is not None and delta is not None:
                left = form.attempt(
                    lambda: (
                        adjust(
                            session,
                            course=found,
                            student=student,
                            delta=delta,
                            reason=reason,
                            by=user,
                            now=utcnow(),
                        ).left
                    ),
                    fields={"student": "email", "delta": "days"},
                )
                if left is not None:
                    said = f"{email} now has {left} late day{'s' if left != 1 else ''} left."
        elif action == "budget":
            require_instructor(session, user=user, course=found)
            window = form.read("regrade_window", lambda text: whole_number(text, "Regrade window"))
            budget = form.read("days", lambda text: whole_number(text, "Late days"))
            most = form.read(
                "cap", lambda text: whole_number(text, "Cap") if text.strip() else None
            )
            changes = form.attempt(
                lambda: set_regrade_window(found, window) if window is not None else [],
                field="regrade_window",
            )
            if not form.failed("days") and not form.failed("cap"):
                more = form.attempt(
                    lambda: latedays.set_budget(
                        session, course=found, days=budget, cap=most, now=utcnow()
                    )
                )
                changes = (changes or []) + (more or [])
            if form.ok:
                said = (
                    ("Saved: " + "; ".join(changes or []) + ".") if changes else "Nothing changed."
                )
                # Committed first; then late days are settled again in short transactions.
                session.commit()
                if found.late_days_recount_at is not None:
                    recount_after_change(found.id)
        else:
            form.refuse("", "That is not something this page does; reload it.")
        if not form.ok:
            return form.refused(
                request,
                session,
                "late_days.html",
                lambda: _late_days_context(session, user, found),
            )
        return back_to(f"/courses/{found.slug}/late-days", said)

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
