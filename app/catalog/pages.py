"""The catalog's pages: a new course, a course copied to a new term, a course archived and
restored. A form that fails is shown again with what was typed and every problem at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.orm import Session

from app.catalog.service import copy_course
from app.core.database import utcnow
from app.courses.lifecycle import (
    archive_course,
    create_course_for,
    require_course_maker,
    restore_course,
)
from app.courses.models import Course
from app.courses.service import course_problems, get_course, require_instructor
from app.users.models import User
from app.web.deps import WebDb
from app.web.forms import PostedForm, back_to
from app.web.templating import check_csrf, render

router = APIRouter(include_in_schema=False)

Text = Annotated[str, Form(max_length=1000)]
_PAGE = "catalog/course_form.html"


def _form(request: Request, *, source: Course | None) -> Response:
    return render(request, _PAGE, {"source": source})


def _made(
    request: Request,
    session: Session,
    source: Course | None,
    form: PostedForm,
    make: Callable[[], Response],
) -> Response:
    """Make the course (`make()`), or show the form again with every problem of its fields."""
    slug, title = form.text("slug").strip(), form.text("title").strip()
    form.refuse_all(course_problems(session, slug=slug, title=title))
    made = form.attempt(make) if form.ok else None
    if made is None:
        return form.refused(request, session, _PAGE, lambda: {"source": source})
    return made


@router.get("/courses/new", response_class=HTMLResponse)
async def new_course_page(request: Request, web: WebDb) -> Response:
    def page(session: Session, user: User) -> Response:
        require_course_maker(session, user=user)
        return _form(request, source=None)

    return await web.run(page)


@router.post("/courses/new", response_class=HTMLResponse)
async def new_course(
    request: Request, web: WebDb, slug: Text = "", title: Text = "", csrf_token: Text = ""
) -> Response:
    form = PostedForm({"slug": slug, "title": title})

    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        require_course_maker(session, user=user)

        def make() -> Response:
            course = create_course_for(
                session, slug=slug.strip(), title=title.strip(), instructor=user, maker=user
            )
            return back_to(
                f"/courses/{course.slug}",
                f"Made {course.title}; you are its instructor. Add labs with `kernelgrader lab "
                f"add {course.slug} LAB`, and people on its People page.",
            )

        return _made(request, session, None, form, make)

    return await web.run(work)


@router.get("/courses/{course}/copy", response_class=HTMLResponse)
async def copy_page(request: Request, course: str, web: WebDb) -> Response:
    def page(session: Session, user: User) -> Response:
        found = get_course(session, slug=course)
        require_instructor(session, user=user, course=found)
        return _form(request, source=found)

    return await web.run(page)


@router.post("/courses/{course}/copy", response_class=HTMLResponse)
async def copy(
    request: Request,
    course: str,
    web: WebDb,
    slug: Text = "",
    title: Text = "",
    csrf_token: Text = "",
) -> Response:
    form = PostedForm({"slug": slug, "title": title})

    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        require_instructor(session, user=user, course=found)

        def make() -> Response:
            done = copy_course(
                session,
                source=found,
                slug=slug.strip(),
                title=title.strip(),
                instructor=user,
                maker=user,
            )
            return back_to(
                f"/courses/{done.course.slug}",
                f"Copied {found.title} to {done.course.title}: {done.labs} labs with their "
                f"settings and policies, {done.rubric_items} rubric items. No lab has dates "
                "yet: set each lab's opening and due date in its settings. Add people on the "
                "People page.",
            )

        return _made(request, session, found, form, make)

    return await web.run(work)


@router.post("/courses/{course}/archive")
async def archive(request: Request, course: str, web: WebDb, csrf_token: Text = "") -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        require_instructor(session, user=user, course=found)
        archive_course(session, course=found, now=utcnow())
        return back_to(
            f"/courses/{found.slug}",
            f"Archived {found.title}: it is gone from everyone's list of courses and takes no "
            "uploads; everything in it is kept. Restore it here to bring it back.",
        )

    return await web.run(work)


@router.post("/courses/{course}/restore")
async def restore(request: Request, course: str, web: WebDb, csrf_token: Text = "") -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        require_instructor(session, user=user, course=found)
        restore_course(session, course=found)
        return back_to(
            f"/courses/{found.slug}", f"Restored {found.title}: it is back in everyone's list."
        )

    return await web.run(work)
