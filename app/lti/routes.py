"""LTI 1.3 endpoints (the LMS and the browser) and the course's LMS page for staff.

As every handler, database work is a function handed to `db.run` / `web.run`. What an LMS
must answer (its key set, the roster) is fetched between two such hops, never inside one,
so no request holds a database connection while an LMS takes its time.
"""

from __future__ import annotations

import time
from typing import Annotated, Any
from urllib.parse import quote, urlsplit

import anyio
import httpx
from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from app.auth import states
from app.auth.problems import SignInRefused
from app.auth.routes import refused_page
from app.core.database import utcnow
from app.core.deps import PublicDb, WebDb, start_session
from app.core.errors import DomainError, Forbidden, NotFound
from app.courses.models import Course, Role
from app.courses.service import get_course, labs_of, require_instructor, require_staff
from app.lti import launch as launches
from app.lti.lms import LMSS
from app.lti.models import LtiContext
from app.lti.tool import CookieJar
from app.users.models import User
from app.web.templating import check_csrf, render

router = APIRouter(include_in_schema=False)


@router.get("/lti/jwks")
async def jwks(db: PublicDb) -> Response:
    from app.lti.keys import key_set

    return JSONResponse(await db.run(key_set))


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


# The LMSs' key sets, per process: fetched again after this long, or for a key id not in it.
_key_sets: dict[str, tuple[float, dict[str, Any]]] = {}
KEY_SET_SECONDS = 600


async def _key_set(url: str, kid: str) -> dict[str, Any]:
    cached = _key_sets.get(url)
    fresh = cached is not None and time.monotonic() - cached[0] < KEY_SET_SECONDS
    if fresh and any(key.get("kid") == kid for key in cached[1].get("keys", [])):  # type: ignore[index]
        return cached[1]  # type: ignore[index]
    async with httpx.AsyncClient(timeout=10) as client:
        answer = await client.get(url)
        answer.raise_for_status()
        found = answer.json()
    if not isinstance(found, dict) or not isinstance(found.get("keys"), list):
        raise ValueError("the key set is not a JSON object with a list of keys")
    _key_sets[url] = (time.monotonic(), found)
    return found


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


def _key_set_url(session: Session, claims: dict[str, Any]) -> str:
    aud = claims.get("aud")
    client_id = aud[0] if isinstance(aud, list) and aud else aud
    from app.lti.tool import DatabaseToolConf

    platform = DatabaseToolConf(session).platform(
        str(claims.get("iss", "")), str(client_id or "") or None
    )
    return platform.key_set_url if platform else ""


@router.post("/lti/launch")
async def launch(request: Request, db: PublicDb) -> Response:
    """Step 2: the LMS posts the signed launch; it is checked, then the person lands."""
    params = {k: str(v) for k, v in (await request.form()).items()}
    header, claims = _unverified(params.get("id_token", ""))
    secure = request.url.scheme == "https"
    cookies = CookieJar(incoming=dict(request.cookies), secure=secure)
    try:
        url = await db.run(lambda session: _key_set_url(session, claims))
        key_sets: dict[str, Any] = {}
        if url:
            try:
                key_sets[url] = await _key_set(url, str(header.get("kid", "")))
            except (httpx.HTTPError, ValueError) as exc:
                raise SignInRefused(
                    "kernelgrader could not read your LMS's signing keys, so the launch could "
                    "not be checked; try again in a minute, and tell your course staff if it "
                    "keeps happening.",
                    f"key set {url}: {exc}",
                    kind="lti",
                    source=str(claims.get("iss", "")),
                ) from None
        landing = await db.run(
            lambda session: launches.launch(
                session,
                params=params,
                cookies=cookies,
                secure=secure,
                key_sets=key_sets,
                unverified=claims,
            )
        )
    except SignInRefused as refused:
        return await refused_page(request, db, refused)
    response = RedirectResponse(landing.target, status_code=303)
    if landing.user_id is not None:
        start_session(request, landing.user_id)  # as at a password login
    cookies.apply(response)
    return response


def _pending(session: Session, key: str) -> dict[str, Any]:
    pending = launches.pending_launch(session, key)
    if pending is None:
        raise NotFound(
            "This launch from your LMS has expired or was used already; open the link again "
            "from the LMS."
        )
    return pending


@router.get("/lti/continue/{key}", response_class=HTMLResponse)
async def continue_page(request: Request, key: str, web: WebDb) -> Response:
    """A launch that needs the person once: to connect the LMS course, or to join their LMS
    sign-in to the account that has their email."""

    def page(session: Session, user: User) -> Response:
        pending = _pending(session, key)
        context = session.get_one(LtiContext, pending["context_id"])
        email = str(pending["identity"].get("email") or "")
        return render(
            request,
            "lti/continue.html",
            {
                "key": key,
                "context": context,
                "courses": launches.staff_courses(session, user=user),
                "lms_email": email,
                "mismatch": bool(email) and email.lower() != user.email.lower(),
                "viewer": user,
            },
        )

    return await web.run(page)


@router.post("/lti/continue/{key}")
async def continue_launch(
    request: Request,
    key: str,
    web: WebDb,
    csrf_token: Annotated[str, Form()] = "",
    course: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> Response:
        from app.lti.service import connect_context

        check_csrf(request, csrf_token)
        pending = _pending(session, key)
        context = session.get_one(LtiContext, pending["context_id"])
        if context.course_id is None:
            if Role(pending["role"]) is Role.student:
                raise Forbidden("Only the course's staff can connect an LMS course.")
            connect_context(session, context=context, user=user, course_slug=course)
        email = str(pending["identity"].get("email") or "")
        if email and email.lower() != user.email.lower() and context.course_id is not None:
            from app.users.service import find_user

            if find_user(session, email=email) is not None:
                raise Forbidden(
                    f"Your LMS says you are {email}, but you are logged in here as {user.email}; "
                    f"log out, log in as {email}, and open the link again."
                )
        states.take(session, f"lti-pending-{key}")
        return RedirectResponse(launches.finish(session, pending=pending, user=user), 303)

    return await web.run(work)


@router.get("/lti/deep-link/{key}", response_class=HTMLResponse)
async def deep_link_page(request: Request, key: str, web: WebDb) -> Response:
    """The instructor picks the lab a new LMS link opens."""

    def page(session: Session, user: User) -> Response:
        pending = _pending(session, key)
        if pending.get("user_id") != user.id:
            raise Forbidden("This choice belongs to the person who opened it in the LMS.")
        context = session.get_one(LtiContext, pending["context_id"])
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
        from app.lti.deep_linking import response_for

        check_csrf(request, csrf_token)
        pending = _pending(session, key)
        if pending.get("user_id") != user.id:
            raise Forbidden("This choice belongs to the person who opened it in the LMS.")
        context = session.get_one(LtiContext, pending["context_id"])
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
        from app.lti.service import overview

        found = get_course(session, slug=course)
        role = require_staff(session, user=user, course=found)
        return render(
            request,
            "lti/course.html",
            {
                "course": found,
                "role": role,
                "urls": launches.tool_urls(),
                "lmss": LMSS,
                "message": message,
                "error": error,
                **overview(session, course=found),
            },
        )

    return await web.run(page)


@router.post("/courses/{course}/lti/platforms")
async def register(
    request: Request,
    course: str,
    web: WebDb,
    issuer: Annotated[str, Form()],
    client_id: Annotated[str, Form()],
    deployment_ids: Annotated[str, Form()],
    auth_login_url: Annotated[str, Form()],
    auth_token_url: Annotated[str, Form()],
    key_set_url: Annotated[str, Form()],
    name: Annotated[str, Form()] = "",
    auth_audience: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> Response:
        from app.lti.service import register_platform

        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        require_instructor(session, user=user, course=found)
        try:
            platform = register_platform(
                session,
                course=found,
                user=user,
                name=name,
                issuer=issuer,
                client_id=client_id,
                deployment_ids=deployment_ids,
                auth_login_url=auth_login_url,
                auth_token_url=auth_token_url,
                key_set_url=key_set_url,
                auth_audience=auth_audience,
            )
        except DomainError as exc:
            session.rollback()
            return _back(found, error=exc.message)
        return _back(found, message=f"Registered {platform.name}; its links now open here.")

    return await web.run(work)


@router.post("/courses/{course}/lti/roster")
async def sync_roster_now(
    request: Request, course: str, web: WebDb, csrf_token: Annotated[str, Form()] = ""
) -> Response:
    """Read every linked LMS course's roster now, and enrol its members."""
    from app.lti import roster

    def read(session: Session, user: User) -> tuple[Course, list[roster.RosterRead]]:
        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        from app.lti.service import course_contexts

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
            from app.lti.grades import lms_reason

            reason = lms_reason(exc)

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
        from app.lti.grades import retry_now

        check_csrf(request, csrf_token)
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        count = retry_now(session, course_id=found.id)
        return _back(
            found,
            message=f"{count} scores will be sent again within a minute (by the workers).",
        )

    return await web.run(work)
