"""The pages: log in with CSRF, upload through the form, see the submission, staff pages."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session

from app.submissions.models import Submission
from tests.app.conftest import GOOD_KERNEL, PASSWORD, Member, World

pytestmark = pytest.mark.anyio


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "the page has no CSRF token"
    return match.group(1)


async def login(client: httpx.AsyncClient, member: Member) -> None:
    page = await client.get("/login")
    r = await client.post(
        "/login",
        data={"email": member.email, "password": PASSWORD, "csrf_token": csrf_of(page.text)},
    )
    assert r.status_code == 303, r.text


async def upload(client: httpx.AsyncClient, world: World, body: bytes) -> httpx.Response:
    lab_url = f"/courses/{world.course.slug}/labs/{world.lab.slug}"
    page = await client.get(lab_url)
    assert page.status_code == 200
    return await client.post(
        f"{lab_url}/submissions",
        data={"csrf_token": csrf_of(page.text)},
        files={"file": ("my kernel.cu", body, "text/plain")},
    )


async def test_pages_need_a_login(client: httpx.AsyncClient, world: World) -> None:
    r = await client.get(f"/courses/{world.course.slug}")
    assert r.status_code == 303
    assert r.headers["location"] == f"/login?next=/courses/{world.course.slug}"


async def test_a_wrong_password_is_refused(client: httpx.AsyncClient, world: World) -> None:
    page = await client.get("/login")
    r = await client.post(
        "/login",
        data={"email": world.student.email, "password": "nope", "csrf_token": csrf_of(page.text)},
    )
    assert r.status_code == 401
    assert "do not match" in r.text


async def test_login_without_csrf_is_refused(client: httpx.AsyncClient, world: World) -> None:
    await client.get("/login")
    r = await client.post("/login", data={"email": world.student.email, "password": PASSWORD})
    assert r.status_code == 403
    assert "reload the page" in r.text


async def test_login_never_redirects_off_site(client: httpx.AsyncClient, world: World) -> None:
    page = await client.get("/login")
    r = await client.post(
        "/login",
        data={
            "email": world.student.email,
            "password": PASSWORD,
            "csrf_token": csrf_of(page.text),
            "next": "//evil.example/",
        },
    )
    assert r.headers["location"] == "/"


async def test_course_and_lab_pages(client: httpx.AsyncClient, world: World) -> None:
    await login(client, world.student)
    course = await client.get(f"/courses/{world.course.slug}")
    assert course.status_code == 200
    assert "Scale a vector (test lab)" in course.text
    assert "Gradebook" not in course.text  # students get no staff links
    lab = await client.get(f"/courses/{world.course.slug}/labs/{world.lab.slug}")
    assert lab.status_code == 200
    assert "<h1>Scale a vector</h1>" in lab.text  # the Markdown lab text
    # Raw HTML in a lab page is shown as text, never run.
    assert "<script>alert" not in lab.text
    assert "&lt;script&gt;alert" in lab.text


async def test_upload_through_the_form(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    await login(client, world.student)
    r = await upload(client, world, GOOD_KERNEL.encode())
    assert r.status_code == 303
    sid = int(r.headers["location"].rsplit("/", 1)[1])
    row = session.get_one(Submission, sid)
    assert row.user_id == world.student.user.id and row.filename == "my kernel.cu"
    page = await client.get(r.headers["location"])
    assert page.status_code == 200
    assert "queued" in page.text
    assert "Place in the queue" in page.text
    assert "/api/v1/submissions/" in page.text  # the page polls the API for live status


async def test_upload_without_csrf_is_refused(client: httpx.AsyncClient, world: World) -> None:
    await login(client, world.student)
    r = await client.post(
        f"/courses/{world.course.slug}/labs/{world.lab.slug}/submissions",
        files={"file": ("k.cu", GOOD_KERNEL.encode(), "text/plain")},
    )
    assert r.status_code == 403


async def test_an_empty_upload_shows_the_reason_on_the_lab_page(
    client: httpx.AsyncClient, world: World
) -> None:
    await login(client, world.student)
    r = await upload(client, world, b"")
    assert r.status_code == 422
    assert "The file is empty" in r.text


async def test_a_student_cannot_open_staff_pages(client: httpx.AsyncClient, world: World) -> None:
    await login(client, world.student)
    for url in (
        f"/courses/{world.course.slug}/gradebook",
        f"/courses/{world.course.slug}/labs/{world.lab.slug}/submissions",
    ):
        r = await client.get(url)
        assert r.status_code == 403
        assert "Only the staff" in r.text


async def test_staff_pages(client: httpx.AsyncClient, world: World) -> None:
    await login(client, world.student)
    await upload(client, world, GOOD_KERNEL.encode())
    client.cookies.clear()
    await login(client, world.ta)
    listing = await client.get(f"/courses/{world.course.slug}/labs/{world.lab.slug}/submissions")
    assert listing.status_code == 200
    assert world.student.email in listing.text
    book = await client.get(f"/courses/{world.course.slug}/gradebook")
    assert book.status_code == 200
    assert f"/api/v1/courses/{world.course.slug}/gradebook.csv" in book.text
    # The CSV link works with the login cookie (reads only).
    csv = await client.get(f"/api/v1/courses/{world.course.slug}/gradebook.csv")
    assert csv.status_code == 200 and world.student.email in csv.text


async def test_logout_ends_the_session(client: httpx.AsyncClient, world: World) -> None:
    await login(client, world.student)
    page = await client.get(f"/courses/{world.course.slug}")
    r = await client.post("/logout", data={"csrf_token": csrf_of(page.text)})
    assert r.status_code == 303
    assert (await client.get(f"/courses/{world.course.slug}")).status_code == 303


def _graded_before_due_date(session: Session, report: Any) -> tuple[World, int]:
    """A lab due tomorrow and a student's submission whose grading recorded `report`."""
    from datetime import timedelta

    from app.core.database import utcnow
    from app.grading.record import record_report
    from app.submissions.models import JobState, Status
    from tests.app.conftest import make_world
    from tests.app.factories import make_submission

    world = make_world(session, due_at=utcnow() + timedelta(days=1))
    submission, job = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.running,
        job_state=JobState.started,
    )
    record_report(session, submission=submission, job=job, report=report)
    session.commit()
    return world, submission.id


async def test_a_graded_submission_page_shows_cases_and_hides_hidden_details(
    client: httpx.AsyncClient, session: Session
) -> None:
    from graders.results import CaseResult as GradedCase
    from graders.results import GpuInfo, GradeReport, TimingStats

    timing = TimingStats(median_ms=0.25, min_ms=0.2, mean_ms=0.25, stdev_ms=0.01, reps=9, rse=0.01)
    cases = [
        GradedCase(
            name="n-1000",
            sizes={"n": 1000},
            hidden=False,
            passed=False,
            verdict="wrong_answer",
            message="dst[7]: expected 2.5, got 0.",
            max_points=6,
            timing=timing,
            reference_timings={"naive": replace(timing, median_ms=0.75)},
        ),
        GradedCase(
            name="n-1048579",
            sizes={"n": 1048579},
            hidden=True,
            passed=False,
            verdict="wrong_answer",
            message="secret detail",
            max_points=4,
        ),
    ]
    report = GradeReport(
        lab="scale-test",
        cases=cases,
        score=0,
        max_score=10,
        summary="0 of 2 cases passed.",
        gpu=GpuInfo(name="NVIDIA H200", arch="sm_90", sm_clock_mhz=1980, temperature_c=35),
        stage_seconds={"compile": 0.5, "run": 6.25},
        stdout="hello from <b>block</b> 0",
    )
    world, submission_id = _graded_before_due_date(session, report)
    await login(client, world.student)
    page = (await client.get(f"/submissions/{submission_id}")).text
    assert "dst[7]: expected 2.5, got 0." in page
    assert "0.250 ms" in page
    assert "naive: 0.750 ms" in page  # the references timed beside it
    assert "Ran on NVIDIA H200 (sm_90), SM clock 1980 MHz, 35 °C" in page
    assert "run 6.2 s" in page or "run 6.3 s" in page
    # The printed output includes the hidden case's run (it could print the hidden sizes), so a
    # student reads it after the due date; staff read it now, escaped.
    assert "hello from" not in page
    assert "shown once the grades are released, since it includes what it printed" in page
    assert "details shown once the grades are released" in page
    assert "secret detail" not in page
    assert "0 of 2 cases passed." in page
    # Students get no regrade button (they may ask for one: a request, see tests/app/regrades).
    assert f'action="/submissions/{submission_id}/regrade"' not in page
    await login(client, world.ta)
    staff_page = (await client.get(f"/submissions/{submission_id}")).text
    assert "hello from &lt;b&gt;block&lt;/b&gt; 0" in staff_page  # printf output, escaped
    assert "secret detail" in staff_page


async def test_before_release_students_see_no_lab_text_and_staff_do(
    client: httpx.AsyncClient, session: Session
) -> None:
    from datetime import timedelta

    from app.core.database import utcnow
    from tests.app.conftest import make_world

    world = make_world(session, release_at=utcnow() + timedelta(days=2))
    url = f"/courses/{world.course.slug}/labs/{world.lab.slug}"
    await login(client, world.student)
    page = (await client.get(url)).text
    assert "This lab opens for submissions" in page
    assert "<h1>Scale a vector</h1>" not in page and 'type="file"' not in page
    client.cookies.clear()
    await login(client, world.instructor)
    page = (await client.get(url)).text
    assert "<h1>Scale a vector</h1>" in page and 'type="file"' in page


async def test_the_source_view_numbers_lines_as_the_compiler_does(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    from sqlalchemy import select

    from app.grading.worker import grade_job
    from app.submissions.models import GradingJob

    # A form feed (old editors put them between sections) is whitespace to the compiler, not a
    # line break: the error on line 4 must be line 4 of the page too.
    source = GOOD_KERNEL.replace("{\n", "{\f\n", 1).replace("factor * src[i]", "factr * src[i]")
    r = await client.post(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/submissions",
        headers=world.student.auth,
        files={"file": ("scale.cu", source.encode(), "text/plain")},
    )
    sid = r.json()["id"]
    job_id = session.scalars(select(GradingJob.id).where(GradingJob.submission_id == sid)).one()
    grade_job(sid, job_id, me="test-worker:1")
    session.expire_all()
    assert "scale.cu(4)" in session.get_one(Submission, sid).compile_log
    await login(client, world.student)
    page = (await client.get(f"/submissions/{sid}")).text
    flagged = re.search(r'<tr id="L4" class="flag">(.*?)</tr>', page, re.S)
    assert flagged and "factr" in flagged.group(1)


async def test_a_form_posted_after_the_login_expired_returns_to_its_page_after_login(
    client: httpx.AsyncClient, world: World
) -> None:
    lab_page = f"/courses/{world.course.slug}/labs/{world.lab.slug}"
    # Not logged in (the session expired while the page was open): the upload is refused, and
    # logging in leads back to the lab page, not to the form's target (a staff-only list).
    r = await client.post(
        lab_page + "/submissions",
        files={"file": ("scale.cu", GOOD_KERNEL.encode(), "text/plain")},
        headers={"Referer": "http://testserver" + lab_page},
    )
    assert r.status_code == 303
    assert r.headers["location"] == f"/login?next={lab_page}"
    # A GET keeps its own path, and an outside referer is not followed.
    assert (await client.get(lab_page)).headers["location"] == f"/login?next={lab_page}"
    r = await client.post(
        lab_page + "/submissions",
        files={"file": ("scale.cu", GOOD_KERNEL.encode(), "text/plain")},
        headers={"Referer": "https://elsewhere.example/phish"},
    )
    assert r.headers["location"] == "/login?next=/"


@pytest.mark.parametrize("withheld", [True, False])
async def test_students_read_the_output_at_once_where_the_engine_withheld_hidden_cases(
    client: httpx.AsyncClient, session: Session, withheld: bool
) -> None:
    from graders.results import HIDDEN_OUTPUT_NOTE, GradeReport
    from graders.results import CaseResult as GradedCase

    cases = [
        GradedCase(
            name="n-1000",
            sizes={"n": 1000},
            hidden=False,
            passed=True,
            verdict="pass",
            message="",
            max_points=6,
        ),
        GradedCase(
            name="n-1048579",
            sizes={"n": 1048579},
            hidden=True,
            passed=True,
            verdict="pass",
            message="",
            max_points=4,
        ),
    ]
    stdout = "debug: n = 1000\n"
    if withheld:
        stdout += HIDDEN_OUTPUT_NOTE.format(name="n-1048579") + "\n"
    report = GradeReport(lab="scale-test", cases=cases, score=10, max_score=10, stdout=stdout)
    world, submission_id = _graded_before_due_date(session, report)
    await login(client, world.student)
    page = (await client.get(f"/submissions/{submission_id}")).text
    # printf debugging works before the due date, but only where the engine says it kept the
    # hidden case's output out; otherwise the output waits for the due date.
    assert ("debug: n = 1000" in page) is withheld
    assert ("shown once the grades are released, since it includes" in page) is not withheld
