"""The performance feature's pages: a lab's leaderboard; and its parts of the submissions' pages
(a submission's timings and charts, a student's leaderboard entry on a lab's page)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response
from markupsafe import Markup
from sqlalchemy.orm import Session

from app.courses.models import Course, Lab
from app.courses.service import (
    find_lab,
    require_member,
)
from app.performance.leaderboard import join_leaderboard, leaderboard, leave_leaderboard, my_entry
from app.performance.service import Performance, submission_performance
from app.submissions.models import Submission
from app.submissions.pages import lab_panels, submission_panels
from app.submissions.schemas import SubmissionRead
from app.users.models import User
from app.web.charts import Bar, bar_chart, histogram, log_bins, meters
from app.web.deps import WebDb
from app.web.forms import back_to, posted
from app.web.templating import check_csrf, number, render

if TYPE_CHECKING:
    from graders.spec import LabSpec

router = APIRouter(include_in_schema=False)


def submission_charts(perf: Performance) -> dict[str, Markup]:
    charts: dict[str, Markup] = {}
    bars = [Bar("your kernel", perf.median_ms, f"{number(perf.median_ms)} ms", highlight=True)]
    bars += [Bar(name, ms, f"{number(ms)} ms") for name, ms in perf.references]
    bars.sort(key=lambda b: b.value)
    charts["times"] = bar_chart(
        bars,
        title=f"Median time on {perf.case}: your kernel and the references (shorter is faster)",
    )
    rows = []
    if perf.gflops is not None:
        if perf.gflops >= 1000:
            text = f"{number(perf.gflops / 1e3)} TFLOP/s"
        else:
            text = f"{number(perf.gflops)} GFLOP/s"
        if perf.peak and perf.flops_fraction is not None:
            peak = perf.peak.tflops(perf.dtype)
            text += f" of {number(peak)} TFLOP/s ({perf.flops_fraction:.1%})"
        rows.append(("arithmetic", perf.flops_fraction or 0.0, text))
    if perf.gbs is not None:
        text = f"{number(perf.gbs)} GB/s"
        if perf.peak and perf.bandwidth_fraction is not None:
            text += f" of {number(perf.peak.bandwidth_gbs)} GB/s ({perf.bandwidth_fraction:.1%})"
        rows.append(("memory", perf.bandwidth_fraction or 0.0, text))
    if rows:
        charts["peaks"] = meters(
            rows, title=f"Achieved throughput against the peak of {perf.gpu_model}"
        )
    if perf.class_times_ms:
        charts["class"] = histogram(
            log_bins([*perf.class_times_ms, perf.median_ms]),
            title="The class's best times on this GPU model, with yours",
            x_label="median time on the timed case (ms, log scale)",
            marker=perf.median_ms,
        )
    return charts


def _leaderboard_context(
    session: Session, user: User, found: Course, row: Lab
) -> dict[str, object]:
    role = require_member(session, user=user, course=found)
    return {
        "course": found,
        "lab": row,
        "role": role,
        "entry": my_entry(session, lab=row, user=user),
        "boards": leaderboard(session, lab=row, viewer_id=user.id),
        "message": "",
        "error": None,
    }


@router.get("/courses/{course}/labs/{lab}/leaderboard", response_class=HTMLResponse)
async def leaderboard_page(
    request: Request, course: str, lab: str, web: WebDb, message: str = ""
) -> Response:
    def page(session: Session, user: User) -> Response:
        found, row = find_lab(session, course=course, lab=lab)
        context = _leaderboard_context(session, user, found, row)
        context["message"] = message[:300]
        return render(request, "leaderboard.html", context)

    return await web.run(page)


@router.post("/courses/{course}/labs/{lab}/leaderboard", response_class=HTMLResponse)
async def join_leaderboard_form(
    request: Request,
    course: str,
    lab: str,
    web: WebDb,
    pseudonym: Annotated[str, Form()],
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    form = await posted(request)

    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found, row = find_lab(session, course=course, lab=lab)
        entry = form.attempt(
            lambda: join_leaderboard(
                session, course=found, lab=row, user=user, pseudonym=pseudonym
            ),
            field="pseudonym",
        )
        if entry is None:
            return form.refused(
                request,
                session,
                "leaderboard.html",
                lambda: _leaderboard_context(session, user, found, row),
            )
        return back_to(
            f"/courses/{found.slug}/labs/{row.slug}/leaderboard",
            f"You are on the leaderboard as {entry.pseudonym}.",
        )

    return await web.run(work)


@router.post("/courses/{course}/labs/{lab}/leaderboard/leave")
async def leave_leaderboard_form(
    request: Request,
    course: str,
    lab: str,
    web: WebDb,
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        found, row = find_lab(session, course=course, lab=lab)
        require_member(session, user=user, course=found)
        leave_leaderboard(session, lab=row, user=user)
        return back_to(
            f"/courses/{found.slug}/labs/{row.slug}/leaderboard", "You left the leaderboard."
        )

    return await web.run(work)


@submission_panels.add
def submission_timings(
    session: Session,
    *,
    submission: Submission,
    view: SubmissionRead,
    spec: LabSpec,
    user: User,
    staff: bool,
) -> dict[str, object]:
    """For a submission's page: its timed case against the references and the class."""
    perf = submission_performance(session, submission=submission, view=view, spec=spec)
    return {"perf": perf, "charts": submission_charts(perf) if perf else {}}


@lab_panels.add
def leaderboard_entry(
    session: Session, *, user: User, course: Course, lab: Lab, staff: bool
) -> dict[str, object]:
    """For a lab's page: the viewer's leaderboard entry, if they joined it."""
    return {"entry": my_entry(session, lab=lab, user=user)}
