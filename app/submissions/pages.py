"""The submissions' pages: a lab's page with its upload form, a submission's page, and the
staff's list of a lab's submissions.

What these pages show from other features (a submission's timings, profile and regrade
requests; a student's leaderboard entry, team, rubric points and requests on a lab's page) is
added by those features as parts (app.web.panels): `submission_panels` and `lab_panels`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Protocol

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.types import Scope

from app.core.database import utcnow
from app.core.errors import DomainError, RateLimited
from app.core.limits import REFUSED_UPLOAD
from app.core.overload import commit_or_confirm
from app.core.settings import get_settings
from app.courses.deadlines import deadline_for, lab_state
from app.courses.models import Course, Lab
from app.courses.release import is_released
from app.courses.service import (
    get_course,
    get_lab,
    require_member,
    require_staff,
)
from app.courses.specs import spec_for
from app.latedays.service import grace_days
from app.rubric.service import grades_of
from app.submissions.models import Submission
from app.submissions.quota import submission_quota
from app.submissions.schemas import SubmissionRead, submission_read
from app.submissions.service import (
    create_submission,
    get_visible_submission,
    is_pending,
    regrade,
    source_text_of,
    submissions_of,
    visible_submission,
)
from app.submissions.status_words import status_tone, status_word
from app.teams.service import (
    CLOSED_INVITATIONS_SHOWN,
    closed_invitations,
    open_invitations,
    team_of,
)
from app.users.models import User
from app.users.service import Student
from app.web.deps import RowId, WebDb
from app.web.panels import Panels
from app.web.templating import check_csrf, render, templates
from graders.sanitizer.verdicts import policy_sentence
from graders.spec.page import spec_markdown

if TYPE_CHECKING:
    from graders.spec import LabSpec

router = APIRouter(include_in_schema=False)

# Every page words a submission's status the same way (app.submissions.status_words).
templates.env.filters["status_word"] = status_word
templates.env.filters["status_tone"] = status_tone


class SubmissionPanel(Protocol):
    """A part of a submission's page: what it adds to the page's context."""

    def __call__(
        self,
        session: Session,
        *,
        submission: Submission,
        view: SubmissionRead,
        spec: LabSpec,
        user: User,
        staff: bool,
    ) -> Mapping[str, object]: ...


class LabPanel(Protocol):
    """A part of a lab's page (for a student, or for the course's staff)."""

    def __call__(
        self, session: Session, *, user: User, course: Course, lab: Lab, staff: bool
    ) -> Mapping[str, object]: ...


submission_panels: Panels[SubmissionPanel] = Panels("submission")
lab_panels: Panels[LabPanel] = Panels("lab")


def _lab_context(session: Session, user: User, course: str, lab: str) -> dict[str, object]:
    found = get_course(session, slug=course)
    role = require_member(session, user=user, course=found)
    lab_row = get_lab(session, course=found, slug=lab)
    # A removed lab is gone from the lists, but its page stays: a student who kept its address
    # finds their own submissions and a note that it is closed.
    now = utcnow()
    deadline = deadline_for(session, lab=lab_row, user_id=user.id)
    grace = grace_days(
        session, course=found, lab=lab_row, user_id=user.id, deadline=deadline, now=now
    )
    return {
        "quota": submission_quota(session, user=user, lab=lab_row, now=now).sentence(now),
        "course": found,
        "role": role,
        "lab": lab_row,
        "deadline": deadline,
        "state": lab_state(lab_row, deadline, now=now, staff=role.is_staff, late_days=grace),
        "grace": grace,
        "spec": spec_for(lab_row),
        "spec_page": _spec_page(spec_for(lab_row)),
        "submissions": submissions_of(session, lab_ids=[lab_row.id], user_id=user.id, limit=50),
        "max_upload_bytes": get_settings().max_upload_bytes,
        "now": utcnow(),
        "error": None,
        "sanitizer_rule": _sanitizer_rule(spec_for(lab_row)),
        **_team_and_rubric(session, user=user, course=found, lab=lab_row, staff=role.is_staff),
        **lab_panels.context(
            session=session, user=user, course=found, lab=lab_row, staff=role.is_staff
        ),
    }


def _team_and_rubric(
    session: Session, *, user: User, course: Course, lab: Lab, staff: bool
) -> dict[str, object]:
    """For a student's lab page: their team, where the lab has teams, the invitations to one
    (open, and closed lately because the team filled up), and their rubric points once the
    lab's grades are released."""
    if staff:
        return {}
    now = utcnow()
    released = is_released(course, lab, now=now)
    return {
        "my_team": team_of(session, lab=lab, user_id=user.id) if lab.team_size > 1 else None,
        "rubric_grades": grades_of(session, lab=lab, user_id=user.id) if released else [],
        "invitations": open_invitations(session, course=course, user=user, lab=lab),
        "closed_invitations": closed_invitations(
            session, lab=lab, user=user, since=now - CLOSED_INVITATIONS_SHOWN
        ),
    }


def _spec_page(spec: LabSpec) -> str:
    """The part of the lab page generated from lab.toml (graders.spec.page): after lab.md's
    prose, the kernels, launches, data, visible cases, checks and points."""
    return spec_markdown(spec)


def _sanitizer_rule(spec: LabSpec) -> str:
    """The lab page says what the sanitizer's findings cost (graders.sanitizer.verdicts)."""
    if not spec.sanitizer:
        return ""

    case = spec.sanitizer_case or spec.cases[0].name
    return policy_sentence(case, spec.sanitizer_hazard_points)


@router.get("/courses/{course}/labs/{lab}", response_class=HTMLResponse)
async def lab_page(request: Request, course: str, lab: str, web: WebDb) -> Response:
    # An upload refused unread (app.core.limits) is answered with this page and its sentence.
    refused = getattr(request.state, REFUSED_UPLOAD, None)

    def page(session: Session, user: User) -> Response:
        context = _lab_context(session, user, course, lab)
        if refused is None:
            return render(request, "lab.html", context)
        context["error"] = refused
        return render(request, "lab.html", context, status_code=413)

    return await web.run(page)


UPLOAD_FORM = re.compile(r"/courses/([^/]+)/labs/([^/]+)/submissions")


def refused_upload_page(scope: Scope) -> Scope | None:
    """The lab page, as a request, for its upload form's body refused unread (too large)."""
    found = UPLOAD_FORM.fullmatch(scope.get("path", ""))
    if scope.get("method") != "POST" or found is None:
        return None
    path = f"/courses/{found[1]}/labs/{found[2]}"
    return {**scope, "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b""}


@router.post("/courses/{course}/labs/{lab}/submissions", response_class=HTMLResponse)
async def submit_form(
    request: Request,
    course: str,
    lab: str,
    web: WebDb,
    file: Annotated[UploadFile, File()],
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    # The form FastAPI read for `file` (kept by the request): a second part would be dropped.
    files = len((await request.form()).getlist("file"))

    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        limit = get_settings().max_upload_bytes
        data = file.file.read(limit + 1)
        context = _lab_context(session, user, course, lab)
        try:
            intake = create_submission(
                session,
                user=user,
                course=context["course"],  # type: ignore[arg-type]
                lab=context["lab"],  # type: ignore[arg-type]
                filename=file.filename,
                data=data,
                now=utcnow(),
                size=file.size,
                files=files,
            )
        except DomainError as exc:
            session.rollback()
            context["error"] = exc.message
            page = render(request, "lab.html", context, status_code=exc.status_code)
            if isinstance(exc, RateLimited):
                page.headers["Retry-After"] = str(exc.retry_after)
            return page
        # As the API's submit: committed (or told what happened); its job then goes to the
        # sender, which sends it without holding up the answer.
        commit_or_confirm(session, landed=intake.stored)
        return RedirectResponse(f"/submissions/{intake.submission_id}", status_code=303)

    return await web.run(work)


@router.get("/submissions/{submission_id}", response_class=HTMLResponse)
async def submission_page(request: Request, submission_id: RowId, web: WebDb) -> Response:
    def page(session: Session, user: User) -> Response:
        return render(request, "submission.html", submission_context(session, user, submission_id))

    return await web.run(page)


def submission_context(session: Session, user: User, submission_id: int) -> dict[str, object]:
    """What the submission's page shows this user (a form on it, refused, shows it again)."""
    submission, staff = visible_submission(session, user=user, submission_id=submission_id)
    view = submission_read(session, submission=submission, viewer_is_staff=staff)
    lab = session.get_one(Lab, submission.lab_id)  # read with the view: no query
    spec = spec_for(lab)
    return {
        "s": view,
        "course_title": session.get_one(Course, lab.course_id).title,
        "lab_title": lab.title,
        "source_lines": source_lines(source_text_of(session, submission=submission)),
        "staff": staff,
        "pending": is_pending(submission),
        **submission_panels.context(
            session=session,
            submission=submission,
            view=view,
            spec=spec,
            user=user,
            staff=staff,
        ),
    }


def source_lines(text: str) -> list[str]:
    # Lines as the compiler and the grader count them, by "\n" only: str.splitlines() also
    # breaks at form feeds and other separators, which would shift every later line number
    # away from the compile log's.
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    return lines[:-1] if lines and lines[-1] == "" else lines


@router.post("/submissions/{submission_id}/regrade")
async def regrade_form(
    request: Request,
    submission_id: RowId,
    web: WebDb,
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        submission = get_visible_submission(session, user=user, submission_id=submission_id)
        regrade(session, user=user, submission=submission, now=utcnow())
        session.commit()  # its job is sent once this commits
        return RedirectResponse(f"/submissions/{submission.id}", status_code=303)

    return await web.run(work)


@router.get("/courses/{course}/labs/{lab}/submissions", response_class=HTMLResponse)
async def lab_submissions_page(request: Request, course: str, lab: str, web: WebDb) -> Response:
    def page(session: Session, user: User) -> Response:
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        lab_row = get_lab(session, course=found, slug=lab)
        rows = submissions_of(session, lab_ids=[lab_row.id])
        ids = {row.user_id for row in rows}
        users = {
            uid: Student(id=uid, name=name, email=email)
            for uid, name, email in session.execute(
                select(User.id, User.name, User.email).where(User.id.in_(ids))
            )
        }
        return render(
            request,
            "lab_submissions.html",
            {"course": found, "lab": lab_row, "rows": rows, "users": users},
        )

    return await web.run(page)
