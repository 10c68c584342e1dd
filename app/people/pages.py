"""The people of a course on the web: the list (staff), and for instructors adding and removing
a student or TA, changing a role, sending a set-password link, and a roster CSV that is
previewed before it is applied.

Links go out by mail where KERNELGRADER_SMTP_HOST is set, after the request commits, to the
person's own address; without mail the page shows a link once, for the instructor to pass on,
only for an account nobody has used yet, and for any other says how that person signs in
(app.people.links). As every page, a handler's database work is one function handed to
`web.run` (app.web.deps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.errors import DomainError, Invalid
from app.core.mail import outbox
from app.core.settings import get_settings
from app.core.timefmt import when_text
from app.courses.models import Course, Role
from app.courses.service import (
    get_course,
    require_instructor,
    require_staff,
)
from app.people.links import Handout, hand_out
from app.people.service import (
    MAX_ROSTER_BYTES,
    RosterPlan,
    add_member,
    apply_roster,
    change_role,
    members_of,
    plan_roster,
    remove_member,
)
from app.users.models import User
from app.users.service import get_user
from app.web.deps import WebDb
from app.web.forms import PostedForm, posted
from app.web.templating import check_csrf, render

router = APIRouter(include_in_schema=False)

INVITE_DAYS = 7


@dataclass(frozen=True)
class Mail:
    to: str
    subject: str
    body: str


def invite_mail(course: Course, handout: Handout) -> Mail:
    issued = handout.issued
    assert issued is not None
    until = when_text(issued.expires_at)
    if handout.in_use:
        body = (
            f"You are enrolled in {course.title} on kernelgrader. Log in as you do now, as "
            f"{issued.user.email}.\n\nIf you have no password, or lost it, this link sets a "
            f"new one (it works once, until {until}; a new password signs you out everywhere "
            f"else and revokes your API tokens):\n\n{issued.url}\n\n"
            "If you did not expect this, ignore the link and ask the course staff.\n"
        )
    else:
        body = (
            f"You are enrolled in {course.title} on kernelgrader, where you upload your CUDA "
            "kernels and read how they did.\n\n"
            f"Set your password with this link (it works once, until {until}):\n\n"
            f"{issued.url}\n\nThen log in as {issued.user.email}. If you did not expect this, "
            "ask the course staff.\n"
        )
    return Mail(
        to=issued.user.email, subject=f"Your kernelgrader account for {course.title}", body=body
    )


def _send(mails: list[Mail]) -> None:
    for mail in mails:
        outbox.send(to=mail.to, subject=mail.subject, body=mail.body)


def _people_url(course: Course, message: str) -> RedirectResponse:
    return RedirectResponse(f"/courses/{course.slug}/people?message={quote(message)}", 303)


def _role(value: str) -> Role:
    try:
        return Role(value)
    except ValueError:
        raise Invalid(f"'{value}' is not a role; choose student, ta or instructor.") from None


def _context(session: Session, course: Course, role: Role, **extra: Any) -> dict[str, Any]:
    return {
        "course": course,
        "can_edit": role is Role.instructor,
        "members": members_of(session, course=course),
        "roles": [r.value for r in Role],
        "mail": get_settings().mail_enabled,
        "links": [],
        "notes": [],
        "message": "",
        "error": None,
        **extra,
    }


@router.get("/courses/{course}/people", response_class=HTMLResponse)
async def people_page(request: Request, course: str, web: WebDb, message: str = "") -> Response:
    def page(session: Session, user: User) -> Response:
        found = get_course(session, slug=course)
        role = require_staff(session, user=user, course=found)
        return render(request, "people.html", _context(session, found, role, message=message[:300]))

    return await web.run(page)


def _invite(session: Session, course: Course, person: User) -> Handout:
    mail = get_settings().mail_enabled
    return hand_out(
        session, course=course, person=person, now=utcnow(), mail=mail, days=INVITE_DAYS
    )


def _after_invites(
    request: Request,
    session: Session,
    course: Course,
    handouts: list[Handout],
    message: str,
) -> tuple[Response, list[Mail]]:
    """Mail the links (after commit) where mail is on; else show the links of unused accounts
    on the page, once, and for accounts in use how their owners sign in."""
    mails = [invite_mail(course, h) for h in handouts if h.issued is not None and not h.shown]
    links = [
        (h.issued.user.email, h.issued.url, when_text(h.issued.expires_at))
        for h in handouts
        if h.issued is not None and h.shown
    ]
    notes = [h.sentence for h in handouts if h.sentence]
    if mails:
        message += f" Sent {len(mails)} link{'s' if len(mails) != 1 else ''} to set a password."
    if not links and not notes:
        return _people_url(course, message), mails
    context = _context(session, course, Role.instructor, message=message, links=links, notes=notes)
    page = render(request, "people.html", context)
    if links:
        page.headers["Cache-Control"] = "no-store"  # the links are secrets
    return page, mails


@router.post("/courses/{course}/people/add", response_class=HTMLResponse)
async def add_person_form(
    request: Request,
    course: str,
    web: WebDb,
    email: Annotated[str, Form()],
    name: Annotated[str, Form()] = "",
    role: Annotated[str, Form()] = "student",
    invite: Annotated[bool, Form()] = False,
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    form = await posted(request, prefix="add-")

    def work(session: Session, user: User) -> tuple[Response, list[Mail]]:
        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        require_instructor(session, user=user, course=found)
        chosen = form.attempt(lambda: _role(role), field="role")
        added = form.attempt(
            lambda: (
                add_member(session, course=found, email=email, name=name, role=chosen)[0]
                if chosen is not None
                else None
            ),
            field="email",
        )
        if added is None:
            return _refused(request, session, found, form), []
        person = added
        done = f"Added {person.email} as {_a(role)} {role}."
        handouts = [_invite(session, found, person)] if invite else []
        return _after_invites(request, session, found, handouts, done)

    page, mails = await web.run(work)
    _send(mails)
    return page


def _refused(
    request: Request, session: Session, course: Course, refusal: DomainError | PostedForm
) -> Response:
    form = refusal if isinstance(refusal, PostedForm) else PostedForm()
    if isinstance(refusal, DomainError):
        form.take(refusal)
    return form.refused(
        request, session, "people.html", lambda: _context(session, course, Role.instructor)
    )


def _a(role: str) -> str:
    return "an" if role[:1] in "aeiou" else "a"


@router.post("/courses/{course}/people/role", response_class=HTMLResponse)
async def change_role_form(
    request: Request,
    course: str,
    web: WebDb,
    email: Annotated[str, Form()],
    role: Annotated[str, Form()],
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        require_instructor(session, user=user, course=found)
        try:
            chosen = _role(role)
            person = get_user(session, email=email)
            was = change_role(session, course=found, user=person, role=chosen)
        except DomainError as exc:
            return _refused(request, session, found, exc)
        if was is chosen:
            return _people_url(found, f"{email} is already {_a(role)} {role}.")
        return _people_url(found, f"{email} is now {_a(role)} {role} (was {_a(was)} {was.value}).")

    return await web.run(work)


@router.post("/courses/{course}/people/remove", response_class=HTMLResponse)
async def remove_person_form(
    request: Request,
    course: str,
    web: WebDb,
    email: Annotated[str, Form()],
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        require_instructor(session, user=user, course=found)
        try:
            was = remove_member(session, course=found, user=get_user(session, email=email))
        except DomainError as exc:
            return _refused(request, session, found, exc)
        return _people_url(
            found,
            f"Removed {email} ({was.value}) from {found.title}; their account and submissions "
            "are kept, and adding them again brings their grades back.",
        )

    return await web.run(work)


@router.post("/courses/{course}/people/invite", response_class=HTMLResponse)
async def invite_person_form(
    request: Request,
    course: str,
    web: WebDb,
    email: Annotated[str, Form()],
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> tuple[Response, list[Mail]]:
        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        require_instructor(session, user=user, course=found)
        person = get_user(session, email=email)
        members = {m.user.id for m in members_of(session, course=found)}
        if person.id not in members:
            raise Invalid(f"{email} is not enrolled in {found.title}; add them first.")
        handout = _invite(session, found, person)
        text = f"A new link for {email} replaces any earlier one." if handout.issued else ""
        return _after_invites(request, session, found, [handout], text)

    page, mails = await web.run(work)
    _send(mails)
    return page


# --- a roster CSV: preview, then apply ---------------------------------------------------


def _preview(
    request: Request,
    session: Session,
    course: Course,
    plan: RosterPlan,
    text: str,
    remove_missing: bool,
    note: str = "",
) -> Response:
    return render(
        request,
        "roster_preview.html",
        {
            "course": course,
            "plan": plan,
            "text": text,
            "remove_missing": remove_missing,
            "digest": plan.digest(),
            "mail": get_settings().mail_enabled,
            "note": note,
        },
    )


@router.post("/courses/{course}/people/roster", response_class=HTMLResponse)
async def roster_preview_form(
    request: Request,
    course: str,
    web: WebDb,
    file: Annotated[UploadFile, File()],
    remove_missing: Annotated[bool, Form()] = False,
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        require_instructor(session, user=user, course=found)
        data = file.file.read(MAX_ROSTER_BYTES + 1)
        try:
            if len(data) > MAX_ROSTER_BYTES:
                raise Invalid(
                    f"The roster is over {MAX_ROSTER_BYTES // (1024 * 1024)} MiB; split it."
                )
            try:
                text = data.decode("utf-8-sig")
            except UnicodeDecodeError:
                raise Invalid(
                    "The roster is not UTF-8 text; save it from your spreadsheet as "
                    "'CSV UTF-8' and upload it again."
                ) from None
            plan = plan_roster(session, course=found, text=text, remove_missing=remove_missing)
        except DomainError as exc:
            return _refused(request, session, found, exc)
        return _preview(request, session, found, plan, text, remove_missing)

    return await web.run(work)


@router.post("/courses/{course}/people/roster/apply", response_class=HTMLResponse)
async def roster_apply_form(
    request: Request,
    course: str,
    web: WebDb,
    roster: Annotated[str, Form(max_length=MAX_ROSTER_BYTES)],
    digest: Annotated[str, Form()],
    remove_missing: Annotated[bool, Form()] = False,
    invite: Annotated[bool, Form()] = False,
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> tuple[Response, list[Mail]]:
        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        require_instructor(session, user=user, course=found)
        plan = plan_roster(session, course=found, text=roster, remove_missing=remove_missing)
        if plan.digest() != digest:
            # Someone changed the course since the preview: show what applying would do now.
            note = (
                "The course changed since you previewed this roster; here is what it would do "
                "now. Apply it again if that is right."
            )
            return _preview(request, session, found, plan, roster, remove_missing, note), []
        added = apply_roster(session, course=found, plan=plan)
        done = (
            f"Applied the roster: {len(plan.add)} added, {len(plan.role_changes)} with a new "
            f"role, {len(plan.remove)} removed, {len(plan.unchanged)} unchanged."
        )
        if plan.problems:
            done += f" {len(plan.problems)} lines were skipped (see the preview)."
        handouts = [_invite(session, found, person) for person in added] if invite else []
        return _after_invites(request, session, found, handouts, done)

    page, mails = await web.run(work)
    _send(mails)
    return page
