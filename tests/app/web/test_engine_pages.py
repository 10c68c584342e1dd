"""What the pages say about the run stage: the sanitizer's rule, and a flag staff alone see."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session

from app.courses.models import Role
from app.courses.service import add_lab, create_course
from app.grading.record import record_report
from app.submissions.models import JobState, Status
from graders.results import CaseResult, GradeReport
from tests.app.conftest import make_member, unique
from tests.app.factories import make_submission
from tests.app.web.test_routes import login

pytestmark = pytest.mark.anyio
TIMED_LAB = Path(__file__).resolve().parents[1] / "labs" / "scale-timed"


async def test_the_lab_page_states_what_sanitizer_findings_cost_and_staff_see_flags(
    client: httpx.AsyncClient, session: Session
) -> None:
    course = create_course(session, slug=unique("pages"), title="Pages")
    lab = add_lab(session, course=course, ref=str(TIMED_LAB))
    student = make_member(session, course, Role.student)
    ta = make_member(session, course, Role.ta)
    submission, job = make_submission(
        session, user=student.user, lab=lab, status=Status.running, job_state=JobState.started
    )
    session.commit()
    case = CaseResult("n-1000", {"n": 1000}, False, True, "pass", "ok", 6.0, 6.0)
    report = GradeReport(lab=lab.slug, cases=[case], score=6, max_score=10, summary="ok")
    report.flags = ["The timed median, 0.001 ms, is 40.0x faster than the fastest reference."]
    record_report(session, submission=submission, job=job, report=report)
    session.commit()

    await login(client, student)
    page = await client.get(f"/courses/{course.slug}/labs/{lab.slug}")
    assert "Compute-sanitizer runs on case n-1000" in page.text
    assert "fails that case too" in page.text
    mine = await client.get(f"/submissions/{submission.id}")
    assert "40.0x faster" not in mine.text

    await client.post("/logout", data={})
    client.cookies.clear()
    await login(client, ta)
    listing = await client.get(f"/courses/{course.slug}/labs/{lab.slug}/submissions")
    assert "flagged for review" in listing.text and "40.0x faster" in listing.text
    theirs = await client.get(f"/submissions/{submission.id}")
    assert "Flagged for staff" in theirs.text
