"""The rubric's pages: a lab's rubric items, reusable comments and each student's points."""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.errors import DomainError, Invalid
from app.courses.models import Course, Enrollment, Lab, Role
from app.courses.release import is_released
from app.courses.service import find_lab, require_staff
from app.rubric import service as rubric
from app.rubric.service import points_possible
from app.users.models import User
from app.users.service import find_user
from app.web.deps import WebDb
from app.web.forms import PostedForm, a_number, back_to
from app.web.templating import check_csrf, render

router = APIRouter(include_in_schema=False)


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
        "most": points_possible(session, labs=[row])[row.id],
        "graded_items": rubric.graded_per_item(session, lab=row),
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
    """Add, edit or remove an item (instructors), a reusable comment, or a student's points
    (staff). The form's fields are read as sent: one points and one comment field per item.
    A refused form comes back with what was typed and every problem beside its field."""
    fields = {k: str(v) for k, v in (await request.form()).items()}
    action = fields.get("action", "")
    item_key = fields.get("item", "")
    # The page has a form per item: each one's field ids start with its own prefix.
    prefix = {"item": "add-", "edit": f"edit-{item_key}-", "comment": f"comment-{item_key}-"}
    form = PostedForm(fields, prefix=prefix.get(action, ""))

    def work(session: Session, user: User) -> Response:
        check_csrf(request, fields.get("csrf_token", ""))
        found, row = find_lab(session, course=course, lab=lab)
        email = fields.get("email", "")
        back = f"/courses/{found.slug}/labs/{row.slug}/rubric"

        def again() -> Response:
            return form.refused(
                request,
                session,
                "rubric.html",
                lambda: _rubric_context(session, user, found, row, email),
            )

        try:
            role = require_staff(session, user=user, course=found)
            if action == "item" and role is not Role.instructor:
                raise Invalid("Only instructors add rubric items.")
            if action in ("edit", "remove") and role is not Role.instructor:
                raise Invalid("Only instructors change or remove rubric items.")
            if action in ("item", "edit"):
                worth = form.read("max_points", lambda t: a_number(t, "The item's points"))
                if not form.ok or worth is None:
                    return again()
                if action == "item":
                    item = rubric.add_item(
                        session,
                        lab=row,
                        title=fields.get("title", ""),
                        max_points=worth,
                        description=fields.get("description", ""),
                    )
                    said = f"Added {item.title} ({item.max_points:g} points)."
                else:
                    item, changes = rubric.update_item(
                        session,
                        lab=row,
                        item_id=_item_id(fields),
                        title=fields.get("title", ""),
                        max_points=worth,
                        description=fields.get("description", ""),
                    )
                    said = f"{item.title} {'; '.join(changes)}." if changes else "Nothing changed."
            elif action == "remove":
                gone = rubric.remove_item(session, lab=row, item_id=_item_id(fields))
                said = f"Removed {gone.title} and every student's points on it."
            elif action == "comment":
                item = rubric.get_item(session, lab=row, item_id=_item_id(fields))
                form.attempt(
                    lambda: rubric.add_comment(
                        session, item=item, text=fields.get("text", ""), by=user
                    ),
                    field="text",
                )
                if not form.ok:
                    return again()
                said = f"Saved a reusable comment for {item.title}."
            elif action == "grade":
                student = find_user(session, email=email)
                if student is None:
                    raise Invalid("Choose a student to grade.")
                scores: dict[int, tuple[float | None, str]] = {}
                for item in rubric.items_of(session, lab=row):
                    comment = fields.get(f"comment_{item.id}", "").strip()
                    reuse = fields.get(f"reuse_{item.id}", "").strip()
                    if reuse:
                        comment = (reuse + ("\n" + comment if comment else "")).strip()
                    # An empty points field clears the item.
                    name = f"points_{item.id}"
                    points = (
                        form.read(name, partial(a_number, what=f"{item.title}: the points"))
                        if form.text(name).strip()
                        else None
                    )
                    scores[item.id] = (points, comment)
                if not form.ok:
                    return again()
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
            form.take(exc)
            return again()
        return back_to(back, said)

    return await web.run(work)


def _item_id(fields: dict[str, str]) -> int:
    raw = fields.get("item", "")
    if not raw.isdigit():
        raise Invalid("That rubric item is not on this page any more; reload it.")
    return int(raw)
