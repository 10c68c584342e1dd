"""/metrics for Prometheus (a bearer token of its own), /admin/system and /admin/fleet for course
staff.

As every handler, the database work is one function handed to `db.run` / `web.run`.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from sqlalchemy.orm import Session

from app.core.errors import Forbidden
from app.core.settings import get_settings
from app.courses.service import courses_of
from app.fleet.metrics import metrics_text, token_matches
from app.fleet.plan_text import model_name, scheduler_said
from app.fleet.policy import minutes
from app.fleet.service import describe_age, fleet_snapshot, grading_sentence
from app.fleet.view import fleet_view, loop_sentence, settings_sentence
from app.users.models import User
from app.web.deps import PublicDb, WebDb
from app.web.templating import render

router = APIRouter(include_in_schema=False)

METRICS_OFF = (
    "Metrics are off: set KERNELGRADER_METRICS_TOKEN on the web service, then scrape /metrics "
    "with the header 'Authorization: Bearer <that token>'.\n"
)
METRICS_DENIED = (
    "This needs the metrics token: send 'Authorization: Bearer <KERNELGRADER_METRICS_TOKEN>'.\n"
)


@router.get("/metrics")
async def metrics(request: Request, db: PublicDb) -> Response:
    # The token is checked on the event loop; only a scrape that passes takes a thread.
    expected = get_settings().metrics_token
    if not expected:
        return PlainTextResponse(METRICS_OFF, status_code=404)
    if not token_matches(expected, request.headers.get("authorization", "")):
        return PlainTextResponse(
            METRICS_DENIED, status_code=401, headers={"WWW-Authenticate": "Bearer"}
        )
    body, content_type = await db.run(metrics_text)
    return Response(body, media_type=content_type)


@router.get("/admin/system", response_class=HTMLResponse)
async def system_page(request: Request, web: WebDb) -> Response:
    """Workers, the queue and the latest errors; jobs and errors of the viewer's courses only."""

    def page(session: Session, user: User) -> Response:
        staff_of = _staff_courses(session, user)
        snapshot = fleet_snapshot(session, course_ids=staff_of)
        return render(
            request,
            "admin_system.html",
            {
                "fleet": snapshot,
                "grading": grading_sentence(snapshot.workers),
                "timeout": get_settings().heartbeat_timeout_seconds,
                "age": describe_age,
            },
        )

    return await web.run(page)


def _staff_courses(session: Session, user: User) -> set[int]:
    staff_of = {course.id for course, role in courses_of(session, user=user) if role.is_staff}
    if not staff_of:
        raise Forbidden("This page is for course staff (TAs and instructors).")
    return staff_of


@router.get("/admin/fleet", response_class=HTMLResponse)
async def fleet_page(request: Request, web: WebDb) -> Response:
    """The borrowed workers: the plan per GPU model and why, each job, the loop. A lab of
    another course is not named."""

    def page(session: Session, user: User) -> Response:
        staff_of = _staff_courses(session, user)
        view = fleet_view(session)
        return render(
            request,
            "admin_fleet.html",
            {
                "view": view,
                "courses": staff_of,
                "loop": loop_sentence(view),
                "settings": settings_sentence(view.settings),
                "span": minutes,
                "model_name": model_name,
                "said": scheduler_said,
            },
        )

    return await web.run(page)
