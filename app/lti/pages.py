"""LTI 1.3 endpoints (the LMS and the browser) and the course's LMS page for staff.

As every handler, database work is a function handed to `db.run` / `web.run`. What an LMS
must answer (its key set, the roster) is fetched between two such hops, never inside one,
so no request holds a database connection while an LMS takes its time.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any
from urllib.parse import quote, urlsplit

import anyio
from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth import states
from app.auth.pages import refused_page, sign_in_ways
from app.auth.problems import SignInRefused
from app.core import outbound
from app.core.database import utcnow
from app.core.errors import Forbidden, NotFound
from app.core.public_address import public_address_problem
from app.core.settings import get_settings
from app.courses.models import Course, Role
from app.courses.service import get_course, labs_of, require_instructor, require_staff
from app.lti import keys, roster
from app.lti import launch as launches
from app.lti.deep_linking import response_for
from app.lti.grades import retry_now
from app.lti.key_sets import KeySetUnavailable, key_set
from app.lti.linking import link, staff_courses, unlink
from app.lti.models import LtiContext, LtiPlatform
from app.lti.registrations import get_registration
from app.lti.service import course_contexts, overview
from app.lti.tool import CookieJar
from app.users.models import User
from app.users.service import find_user
from app.web.deps import PublicDb, WebDb, start_session
from app.web.templating import check_csrf, render

router = APIRouter(include_in_schema=False)


@sign_in_ways.add
def lms_sign_in(session: Session) -> dict[str, object]:
    """The login page says an LMS's course opens kernelgrader only where an LMS is registered."""
    return {"lms": session.scalar(select(LtiPlatform.id).limit(1)) is not None}


@router.get("/lti/jwks")
async def shared_jwks(db: PublicDb) -> Response:
    """The one key of registrations made before each had its own (empty once all rotated)."""
    return JSONResponse(await db.run(keys.shared_key_set))


@router.get("/lti/jwks/{slug}")
async def jwks(slug: str, db: PublicDb) -> Response:
    """A registration's own key set: its LMS checks the tool's signatures with this alone."""
    return JSONResponse(
        await db.run(lambda s: keys.key_set(s, platform=get_registration(s, slug=slug)))
    )


@router.api_route("/lti/login", methods=["GET", "POST"])
async def login(request: Request, db: PublicDb) -> Response:
    """Step 1: the LMS starts a sign-in; the browser goes on to the LMS's OIDC endpoint."""
    params = dict(request.query_params)
    if request.method == "POST":
        params.update({k: str(v) for k, v in (await request.form()).items()})
    secure = request.url.scheme == "https"
    cookies = CookieJar(incoming=dict(request.cookies), secure=secure)
    try:
        url = await db.run(
            lambda session: launches.login(session, params=params, cookies=cookies, secure=secure)
        )
    except SignInRefused as refused:
        return await refused_page(request, db, refused)
    response = RedirectResponse(url, status_code=302)
    cookies.apply(response)
    return response


def _unverified(id_token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The token's header and claims, read (not trusted) only to find whose key set to fetch;
    pylti1p3 verifies the token afterwards."""
    import jwt

    try:
        return jwt.get_unverified_header(id_token), jwt.decode(
            id_token, options={"verify_signature": False}
        )
    except jwt.PyJWTError:
        return {}, {}


def _key_set_of(session: Session, claims: dict[str, Any]) -> tuple[str, launches.Filing]:
    """The key set URL of the registration the (unverified) launch names, if we know it."""
    where = launches.filing(session, claims)
    if where.platform_id is None:
        return "", where
    platform = session.get_one(LtiPlatform, where.platform_id)
    return platform.key_set_url, where


def _browser(request: Request) -> str:
    found = request.cookies.get(launches.BROWSER_COOKIE, "")
    return found if 20 <= len(found) <= 100 else secrets.token_urlsafe(32)


def _keep_browser(request: Request, response: Response, browser: str) -> None:
    response.set_cookie(
        launches.BROWSER_COOKIE,
        browser,
        max_age=launches.PENDING_SECONDS,
        httponly=True,
        secure=request.url.scheme == "https",
        samesite="lax",
        path="/lti",
    )


@router.post("/lti/launch")
async def launch(request: Request, db: PublicDb) -> Response:
    """Step 2: the LMS posts the signed launch; it is checked, then the person lands."""
    params = {k: str(v) for k, v in (await request.form()).items()}
    header, claims = _unverified(params.get("id_token", ""))
    secure = request.url.scheme == "https"
    cookies = CookieJar(incoming=dict(request.cookies), secure=secure)
    browser = _browser(request)
    try:
        # Only a registration's own key set is fetched, and only for a launch that names
        # one of its deployments: anything else is refused without a request going out.
        url, where = await db.run(lambda session: _key_set_of(session, claims))
        key_sets: dict[str, Any] = {}
        if url:
            try:
                key_sets[url] = await key_set(url, str(header.get("kid", ""))[:200])
            except KeySetUnavailable as exc:
                raise SignInRefused(
                    "kernelgrader could not read your LMS's signing keys, so the launch could "
                    "not be checked; try again in a minute, and tell your course staff if it "
                    "keeps happening.",
                    f"key set {url}: {exc.reason}",
                    kind="lti",
                    source=str(claims.get("iss", ""))[:200],
                    platform_id=where.platform_id,
                    course_id=where.course_id,
                ) from None
        landing = await db.run(
            lambda session: launches.launch(
                session,
                params=params,
                cookies=cookies,
                secure=secure,
                key_sets=key_sets,
                unverified=claims,
                browser=browser,
            )
        )
    except SignInRefused as refused:
        return await refused_page(request, db, refused)
    response = RedirectResponse(landing.target, status_code=303)
    if landing.user_id is not None:
        start_session(request, landing.user_id)  # as at a password login
    cookies.apply(response)
    _keep_browser(request, response, browser)
    return response


def _pending(session: Session, key: str, request: Request) -> dict[str, Any]:
    browser = request.cookies.get(launches.BROWSER_COOKIE, "")
    pending = launches.pending_launch(session, key, browser=browser)
    if pending is None:
        raise NotFound(
            "This launch from your LMS has expired, was used already, or was opened in "
            "another browser than the one it came to; open the link again from the LMS."
        )
    return pending


@router.get("/lti/continue/{key}", response_class=HTMLResponse)
async def continue_page(request: Request, key: str, web: WebDb) -> Response:
    """A launch that needs the person once, logged in with their own kernelgrader account: to
    link the LMS course to a course they teach, or to join their LMS sign-in to the account
    that has their email."""

    def page(session: Session, user: User) -> Response:
        pending = _pending(session, key, request)
        email = str(pending["identity"].get("email") or "")
        return render(
            request,
            "lti/continue.html",
            {
                "key": key,
                "linking": "context_id" not in pending,
                "lms_course": pending["context"],
                "courses": staff_courses(session, user=user),
                "lms_email": email,
                "mismatch": _mismatch(session, email, user),
                "viewer": user,
            },
        )

    return await web.run(page)


def _mismatch(session: Session, email: str, user: User) -> bool:
    """The LMS's email is another account's: joining it to this one is that owner's act."""
    if not email or email.lower() == user.email.lower():
        return False
    return find_user(session, email=email) is not None


@router.post("/lti/continue/{key}")
async def continue_launch(
    request: Request,
    key: str,
    web: WebDb,
    csrf_token: Annotated[str, Form()] = "",
    course: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        pending = _pending(session, key, request)
        email = str(pending["identity"].get("email") or "")
        if _mismatch(session, email, user):
            raise Forbidden(
                f"Your LMS says you are {email}, but you are logged in here as {user.email}; "
                f"log out, log in as {email}, and open the link again."
            )
        if "context_id" not in pending:
            if Role(pending["role"]) is not Role.instructor:
                raise Forbidden("Only the LMS course's instructor can link it to a course.")
            context = link(session, pending=pending, user=user, course_slug=course)
            pending = {**pending, "context_id": context.id}
        states.take(session, f"lti-pending-{key}")
        return RedirectResponse(launches.finish(session, pending=pending, user=user), 303)

    return await web.run(work)


@router.get("/lti/deep-link/{key}", response_class=HTMLResponse)
async def deep_link_page(request: Request, key: str, web: WebDb) -> Response:
    """The instructor picks the lab a new LMS link opens."""

    def page(session: Session, user: User) -> Response:
        pending = _pending(session, key, request)
        if pending.get("user_id") != user.id:
            raise Forbidden("This choice belongs to the person who opened it in the LMS.")
        context = session.get_one(LtiContext, pending["context_id"])
        if context.course_id is None:
            raise NotFound("This LMS course was unlinked meanwhile; open the link again.")
        course = session.get_one(Course, context.course_id)
        return render(
            request,
            "lti/deep_link.html",
            {"key": key, "course": course, "labs": labs_of(session, course=course)},
        )

    return await web.run(page)


@router.post("/lti/deep-link/{key}")
async def deep_link_choose(
    request: Request,
    key: str,
    web: WebDb,
    lab: Annotated[str, Form()],
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        pending = _pending(session, key, request)
        if pending.get("user_id") != user.id:
            raise Forbidden("This choice belongs to the person who opened it in the LMS.")
        context = session.get_one(LtiContext, pending["context_id"])
        if context.course_id is None:
            raise NotFound("This LMS course was unlinked meanwhile; open the link again.")
        chosen = next(
            (
                x
                for x in labs_of(session, course=session.get_one(Course, context.course_id))
                if x.slug == lab
            ),
            None,
        )
        if chosen is None:
            raise NotFound(f"There is no lab {lab} in this course; pick one from the list.")
        return_url, token = response_for(session, pending=pending, context=context, lab=chosen)
        states.take(session, f"lti-pending-{key}")
        page = render(request, "lti/autopost.html", {"action": return_url, "jwt": token})
        # The form goes back to the LMS's site: allowed for this page alone.
        target = urlsplit(return_url)
        page.headers["Content-Security-Policy"] = (
            "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
            f"form-action {target.scheme}://{target.netloc}; frame-ancestors 'none'"
        )
        return page

    return await web.run(work)


# --- the course's LMS page -----------------------------------------------------------------


def _back(course: Course, message: str = "", error: str = "") -> RedirectResponse:
    query = f"?message={quote(message)}" if message else f"?error={quote(error)}"
    return RedirectResponse(f"/courses/{course.slug}/lti{query}", status_code=303)


@router.get("/courses/{course}/lti", response_class=HTMLResponse)
async def course_lti_page(
    request: Request, course: str, web: WebDb, message: str = "", error: str = ""
) -> Response:
    def page(session: Session, user: User) -> Response:
        found = get_course(session, slug=course)
        role = require_staff(session, user=user, course=found)
        return render(
            request,
            "lti/course.html",
            {
                "course": found,
                "role": role,
                "urls": launches.tool_urls(),
                "keep_days": get_settings().sign_in_problem_days,
                "address_problem": public_address_problem(get_settings().public_url),
                "message": message,
                "error": error,
                **overview(session, course=found),
            },
        )

    return await web.run(page)


@router.post("/courses/{course}/lti/unlink")
async def unlink_context(
    request: Request,
    course: str,
    web: WebDb,
    context: Annotated[int, Form(ge=1, le=2**63 - 1)],
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """The course's instructor unlinks an LMS course: its launches then land nowhere."""

    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        require_instructor(session, user=user, course=found)
        gone = unlink(session, course=found, context_id=context)
        return _back(
            found,
            message=f"Unlinked {gone.title or gone.context_id}; its links no longer open "
            "this course.",
        )

    return await web.run(work)


@router.post("/courses/{course}/lti/roster")
async def sync_roster_now(
    request: Request, course: str, web: WebDb, csrf_token: Annotated[str, Form()] = ""
) -> Response:
    """Read every linked LMS course's roster now, and enrol its members."""

    def read(session: Session, user: User) -> tuple[Course, list[roster.RosterRead]]:
        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)

        reads = [
            read
            for context in course_contexts(session, course=found)
            if (read := roster.read_context(session, context_id=context.id)) is not None
        ]
        return found, reads

    found, reads = await web.run(read)
    if not reads:
        return _back(
            found,
            error="No LMS course linked here offers its roster yet; open the tool once from "
            "the LMS course (with names and roles turned on), then try again.",
        )
    sentences = []
    for one in reads:
        try:
            members = await anyio.to_thread.run_sync(roster.fetch_members, one)
        except Exception as exc:
            reason = outbound.reason(exc)

            def failed(s: Session, u: User, one: Any = one, reason: str = reason) -> None:
                roster.record_failure(s, context_id=one.context_id, reason=reason, now=utcnow())

            await web.run(failed)
            sentences.append(f"The LMS did not give the roster: {reason}")
            continue

        def apply(s: Session, u: User, one: Any = one, members: Any = members) -> str:
            return roster.apply_members(s, read=one, members=members, now=utcnow())

        sentences.append(await web.run(apply))
    return _back(found, message=" ".join(sentences))


@router.post("/courses/{course}/lti/retry")
async def retry_scores(
    request: Request, course: str, web: WebDb, csrf_token: Annotated[str, Form()] = ""
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        count = retry_now(session, course_id=found.id)
        return _back(
            found,
            message=f"{count} scores will be sent again within a minute (by the workers).",
        )

    return await web.run(work)
