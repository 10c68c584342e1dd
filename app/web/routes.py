"""The pages: thin handlers that fetch, check access and render.

Each handler is `async def` and does its database work, the page's rendering included (a
template may read a row's relations), in one function handed to `web.run` (app.web.deps).
"""

from __future__ import annotations

import ipaddress
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from urllib.parse import quote

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.routes import safe_next
from app.core.database import utcnow
from app.core.errors import DomainError, RateLimited
from app.core.overload import commit_or_confirm
from app.core.settings import get_settings
from app.courses.deadlines import Deadline, deadline_for, lab_state
from app.courses.models import Course, Lab, LatePolicy
from app.courses.release import is_released
from app.courses.service import (
    courses_of,
    get_course,
    get_lab,
    labs_of,
    move_lab,
    require_instructor,
    require_member,
    require_staff,
)
from app.courses.specs import spec_for
from app.gradebook.service import Student, gradebook
from app.grading.queue import stamp_send
from app.grading.sender import send_after_commit
from app.latedays.service import available_for, balance
from app.performance.leaderboard import my_entry
from app.performance.service import submission_performance
from app.policy.counting import best_scores, is_pending
from app.profiling.views import profile_view
from app.submissions.quota import submission_quota
from app.submissions.schemas import submission_read
from app.submissions.service import (
    create_submission,
    get_visible_submission,
    regrade,
    source_text_of,
    submissions_of,
    visible_submission,
)
from app.users.models import User
from app.users.service import authenticate
from app.web.deps import PublicDb, RowId, WebDb, start_session
from app.web.perf_charts import submission_charts
from app.web.reviews import lab_policy_context, regrade_context
from app.web.templating import check_csrf, render

if TYPE_CHECKING:
    from graders.spec import LabSpec

router = APIRouter(include_in_schema=False)

STATIC = Path(__file__).parent / "static"
# Browsers ask for /favicon.ico on every page whatever the page links; a day in their cache.
_ICON_HEADERS = {"Cache-Control": "public, max-age=86400"}


@router.get("/favicon.ico")
async def favicon_ico() -> Response:
    return FileResponse(STATIC / "favicon.ico", media_type="image/x-icon", headers=_ICON_HEADERS)


@router.get("/favicon.svg")
async def favicon_svg() -> Response:
    return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml", headers=_ICON_HEADERS)


def client_network(host: str) -> str:
    """The address a login failure counts against: IPv4 as is, IPv6 by its /64 network.

    An IPv6 host is handed a whole /64 and can pick a fresh address for every guess.
    """
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host or "unknown"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


SIGNED_OUT = (
    "You are signed out everywhere: every browser that was logged in to your account must log "
    "in again. Your API tokens still work; revoke any that may have leaked on your account page."
)


@router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request, next: str = "/", signed_out: bool = False) -> Response:
    notice = SIGNED_OUT if signed_out else ""
    return render(request, "login.html", {"next": safe_next(next), "error": None, "notice": notice})


@router.post("/login", response_class=HTMLResponse)
async def login(
    request: Request,
    db: PublicDb,
    email: Annotated[str, Form()],
    password: Annotated[str, Form()],
    csrf_token: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/",
) -> Response:
    check_csrf(request, csrf_token)
    # Throttle guessing per account from one address, and per address, before spending time on
    # the hash. Not per account alone: a stranger's guesses would lock its owner out everywhere.
    network = client_network(request.client.host if request.client else "")
    account = f"account:{email.strip().lower()}|{network}"
    address = "address:" + network
    throttle, address_throttle = (
        request.app.state.login_throttle,
        request.app.state.login_address_throttle,
    )
    wait = max(throttle.retry_after(account), address_throttle.retry_after(address))
    if wait:
        page = render(
            request,
            "login.html",
            {
                "next": safe_next(next),
                "error": f"Too many failed logins; wait {wait} seconds, then try again.",
            },
            status_code=429,
        )
        page.headers["Retry-After"] = str(wait)
        return page
    # The password hash is slow on purpose: in a request thread, never on the event loop.
    user = await db.run(lambda session: authenticate(session, email=email, password=password))
    if user is None:
        throttle.failed(account)
        address_throttle.failed(address)
        return render(
            request,
            "login.html",
            {"next": safe_next(next), "error": "That email and password do not match; try again."},
            status_code=401,
        )
    throttle.succeeded(account)
    start_session(request, user.id)
    return RedirectResponse(safe_next(next), status_code=303)


@router.post("/logout")
async def logout(request: Request, csrf_token: Annotated[str, Form()] = "") -> Response:
    check_csrf(request, csrf_token)
    request.session.clear()
    return RedirectResponse("/login", status_code=303)


@router.get("/", response_class=HTMLResponse)
async def home(request: Request, web: WebDb) -> Response:
    def page(session: Session, user: User) -> Response:
        courses = courses_of(session, user=user)
        if len(courses) == 1:
            return RedirectResponse(f"/courses/{courses[0][0].slug}", status_code=303)
        return render(request, "home.html", {"courses": courses})

    return await web.run(page)


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
        rows = []
        for lab in labs:
            deadline = deadline_for(session, lab=lab, user_id=user.id)
            rows.append(
                {
                    "lab": lab,
                    "cell": scores[lab.id],
                    "deadline": deadline,
                    "state": lab_state(
                        lab,
                        deadline,
                        now=now,
                        staff=role.is_staff,
                        late_days=_grace(session, found, lab, user, deadline, now),
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


def _lab_context(session: Session, user: User, course: str, lab: str) -> dict[str, object]:
    found = get_course(session, slug=course)
    role = require_member(session, user=user, course=found)
    lab_row = get_lab(session, course=found, slug=lab)
    # A removed lab is gone from the lists, but its page stays: a student who kept its address
    # finds their own submissions and a note that it is closed.
    now = utcnow()
    deadline = deadline_for(session, lab=lab_row, user_id=user.id)
    grace = _grace(session, found, lab_row, user, deadline, now)
    return {
        "quota": submission_quota(session, user=user, lab=lab_row, now=now).sentence(now),
        "course": found,
        "role": role,
        "lab": lab_row,
        "deadline": deadline,
        "state": lab_state(lab_row, deadline, now=now, staff=role.is_staff, late_days=grace),
        "grace": grace,
        "entry": my_entry(session, lab=lab_row, user=user),
        "spec": spec_for(lab_row),
        "spec_page": _spec_page(spec_for(lab_row)),
        "submissions": submissions_of(session, lab_ids=[lab_row.id], user_id=user.id, limit=50),
        "max_upload_bytes": get_settings().max_upload_bytes,
        "now": utcnow(),
        "error": None,
        "sanitizer_rule": _sanitizer_rule(spec_for(lab_row)),
        **lab_policy_context(session, user=user, course=found, lab=lab_row, staff=role.is_staff),
    }


def _grace(
    session: Session, course: Course, lab: Lab, user: User, deadline: Deadline, now: datetime
) -> int:
    """Late days that keep a lab refusing late work open for the student (app.latedays)."""
    if lab.late_policy != LatePolicy.refuse.value or not deadline.is_late(now):
        return 0
    return available_for(session, course=course, lab=lab, user_id=user.id)


def _spec_page(spec: LabSpec) -> str:
    """The part of the lab page generated from lab.toml (graders.spec.page): after lab.md's
    prose, the kernels, launches, data, visible cases, checks and points."""
    from graders.spec.page import spec_markdown

    return spec_markdown(spec)


def _sanitizer_rule(spec: LabSpec) -> str:
    """The lab page says what the sanitizer's findings cost (graders.sanitizer.verdicts)."""
    if not spec.sanitizer:
        return ""
    from graders.sanitizer.verdicts import policy_sentence

    case = spec.sanitizer_case or spec.cases[0].name
    return policy_sentence(case, spec.sanitizer_hazard_points)


@router.get("/courses/{course}/labs/{lab}", response_class=HTMLResponse)
async def lab_page(request: Request, course: str, lab: str, web: WebDb) -> Response:
    def page(session: Session, user: User) -> Response:
        return render(request, "lab.html", _lab_context(session, user, course, lab))

    return await web.run(page)


@router.post("/courses/{course}/labs/{lab}/submissions", response_class=HTMLResponse)
async def submit_form(
    request: Request,
    course: str,
    lab: str,
    web: WebDb,
    file: Annotated[UploadFile, File()],
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
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
            )
        except DomainError as exc:
            session.rollback()
            context["error"] = exc.message
            page = render(request, "lab.html", context, status_code=exc.status_code)
            if isinstance(exc, RateLimited):
                page.headers["Retry-After"] = str(exc.retry_after)
            return page
        # As the API's submit: stamped and committed (or told what happened), then handed to
        # the sender, which sends it without holding up the answer.
        stamp = stamp_send(intake.job)
        commit_or_confirm(session, landed=intake.stored)
        send_after_commit(
            submission_id=intake.submission_id, job_id=intake.job_id, stamped_at=stamp
        )
        return RedirectResponse(f"/submissions/{intake.submission_id}", status_code=303)

    return await web.run(work)


@router.get("/submissions/{submission_id}", response_class=HTMLResponse)
async def submission_page(request: Request, submission_id: RowId, web: WebDb) -> Response:
    def page(session: Session, user: User) -> Response:
        submission, staff = visible_submission(session, user=user, submission_id=submission_id)
        view = submission_read(session, submission=submission, viewer_is_staff=staff)
        lab = session.get_one(Lab, submission.lab_id)  # read with the view: no query
        spec = spec_for(lab)
        perf = submission_performance(session, submission=submission, view=view, spec=spec)
        profile = profile_view(session, submission=submission, spec=spec, viewer_is_staff=staff)
        return render(
            request,
            "submission.html",
            {
                "s": view,
                "course_title": session.get_one(Course, lab.course_id).title,
                "lab_title": lab.title,
                "source_lines": source_lines(source_text_of(session, submission=submission)),
                "staff": staff,
                "pending": is_pending(submission),
                "perf": perf,
                "charts": submission_charts(perf) if perf else {},
                "profile": profile,
                **regrade_context(session, submission=submission, user=user, staff=staff),
            },
        )

    return await web.run(page)


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
        job = regrade(session, user=user, submission=submission, now=utcnow())
        stamp = stamp_send(job)
        session.commit()
        send_after_commit(submission_id=submission.id, job_id=job.id, stamped_at=stamp)
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


@router.get("/courses/{course}/gradebook", response_class=HTMLResponse)
async def gradebook_page(request: Request, course: str, web: WebDb) -> Response:
    def page(session: Session, user: User) -> Response:
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        labs, rows = gradebook(session, course=found)
        return render(
            request,
            "gradebook.html",
            {
                "course": found,
                "labs": labs,
                "rows": rows,
                "total_max": sum(lab.max_score for lab in labs),
            },
        )

    return await web.run(page)
