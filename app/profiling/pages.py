"""Pages of profiles: asking for one (staff), a student's history in a lab, two submissions
side by side, and the class's common findings (staff); and a submission's page's profile."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.errors import Invalid
from app.courses.models import Course, Lab
from app.courses.service import get_course, get_lab, require_staff
from app.courses.specs import spec_for
from app.profiling.api import history_owner
from app.profiling.charts import history_chart
from app.profiling.service import request_profile
from app.profiling.views import class_summary, compare, history, profile_view
from app.submissions.models import Submission
from app.submissions.pages import submission_panels
from app.submissions.schemas import SubmissionRead
from app.submissions.service import get_visible_submission, source_text_of, visible_submission
from app.users.models import User
from app.web.deps import RowId, WebDb
from app.web.templating import check_csrf, render

if TYPE_CHECKING:
    from graders.spec import LabSpec

router = APIRouter(include_in_schema=False)


@router.post("/submissions/{submission_id}/profile")
async def profile_form(
    request: Request,
    submission_id: RowId,
    web: WebDb,
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    def work(session: Session, user: User) -> Response:
        check_csrf(request, csrf_token)
        submission = get_visible_submission(session, user=user, submission_id=submission_id)
        request_profile(session, user=user, submission=submission, now=utcnow())
        session.commit()
        return RedirectResponse(f"/submissions/{submission.id}#profile", status_code=303)

    return await web.run(work)


@router.get("/courses/{course}/labs/{lab}/history", response_class=HTMLResponse)
async def history_page(
    request: Request, course: str, lab: str, web: WebDb, user: str = ""
) -> Response:
    def page(session: Session, viewer: User) -> Response:
        found = get_course(session, slug=course)
        lab_row = get_lab(session, course=found, slug=lab)
        owner, staff = history_owner(session, user=viewer, lab=lab_row, email=user or None)
        points = history(
            session, lab=lab_row, spec=spec_for(lab_row), user_id=owner.id, viewer_is_staff=staff
        )
        references = _reference_times(points)
        return render(
            request,
            "history.html",
            {
                "course": found,
                "lab": lab_row,
                "owner": owner,
                "own": owner.id == viewer.id,
                "points": points,
                "references": references,
                "chart": history_chart(points, references),
            },
        )

    return await web.run(page)


def _reference_times(points: list) -> dict[str, float]:  # type: ignore[type-arg]
    """The references' times, from the newest timed submission's ratios."""
    for p in reversed(points):
        if p.median_ms and p.ratios:
            return {name: p.median_ms / ratio for name, ratio in p.ratios.items() if ratio > 0}
    return {}


@router.get("/submissions/compare", response_class=HTMLResponse)
async def compare_page(request: Request, web: WebDb, a: int = 0, b: int = 0) -> Response:
    def page(session: Session, user: User) -> Response:
        if a <= 0 or b <= 0 or a >= 2**63 or b >= 2**63:
            raise Invalid("Pick two submissions to compare (?a=ID&b=ID).")
        first, staff = visible_submission(session, user=user, submission_id=a)
        second, _ = visible_submission(session, user=user, submission_id=b)
        if first.lab_id != second.lab_id or first.user_id != second.user_id:
            raise Invalid(
                "Only two submissions of one student to one lab compare; pick two from the "
                "same lab's history."
            )
        lab_row = session.get_one(Lab, first.lab_id)
        course = session.get_one(Course, lab_row.course_id)
        result = compare(
            session,
            a=first,
            b=second,
            a_source=source_text_of(session, submission=first),
            b_source=source_text_of(session, submission=second),
            spec=spec_for(lab_row),
            viewer_is_staff=staff,
        )
        return render(
            request,
            "compare.html",
            {"course": course, "lab": lab_row, "c": result},
        )

    return await web.run(page)


@router.get("/courses/{course}/labs/{lab}/profiles", response_class=HTMLResponse)
async def class_profiles_page(request: Request, course: str, lab: str, web: WebDb) -> Response:
    def page(session: Session, user: User) -> Response:
        found = get_course(session, slug=course)
        require_staff(session, user=user, course=found)
        lab_row = get_lab(session, course=found, slug=lab)
        return render(
            request,
            "lab_profiles.html",
            {"course": found, "lab": lab_row, "summary": class_summary(session, lab=lab_row)},
        )

    return await web.run(page)


@submission_panels.add
def submission_profile(
    session: Session,
    *,
    submission: Submission,
    view: SubmissionRead,
    spec: LabSpec,
    user: User,
    staff: bool,
) -> dict[str, object]:
    """For a submission's page: its latest profile, as the viewer may see it."""
    return {
        "profile": profile_view(session, submission=submission, spec=spec, viewer_is_staff=staff)
    }
