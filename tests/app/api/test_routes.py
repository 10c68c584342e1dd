"""The REST API: who may call what, and the intake checks on uploads."""

from __future__ import annotations

import json
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import LatePolicy
from app.submissions.models import GradingJob, JobState, Submission, SubmissionEvent
from tests.app.conftest import GOOD_KERNEL, Member, World, make_world, unique

pytestmark = pytest.mark.anyio


def submit_url(world: World) -> str:
    return f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/submissions"


async def submit(
    client: httpx.AsyncClient,
    world: World,
    member: Member,
    body: bytes = GOOD_KERNEL.encode(),
    filename: str = "scale.cu",
) -> httpx.Response:
    return await client.post(
        submit_url(world), headers=member.auth, files={"file": (filename, body, "text/plain")}
    )


async def test_health_needs_no_login(client: httpx.AsyncClient) -> None:
    r = await client.get("/api/v1/health")
    assert r.status_code == 200
    body = r.json()
    assert {k: body[k] for k in ("status", "version", "database")} == {
        "status": "ok",
        "version": "0.1.0",
        "database": "ok",
    }


async def test_health_reports_the_workers_heard_from_and_what_each_can_do(
    client: httpx.AsyncClient,
) -> None:
    from app.jobs import workers

    name = f"gpu-host-{unique('h')}:77"
    gpu = f"GPU-{unique('uuid')}"  # this test's worker alone
    workers.register_worker(
        name=name,
        host="gpu-host",
        pid=77,
        gpu=gpu,
        gpu_model="NVIDIA H200",
        arch="sm_90",
        can_compile=True,
        can_run=True,
        note="",
        queues=["grading", "grading.gpu"],
        version="0.1.0",
    )
    try:
        body = (await client.get("/api/v1/health")).json()
        (report,) = [w for w in body["workers"] if w["gpu"] == gpu]
        assert report["gpu_model"] == "NVIDIA H200"
        assert (report["compile"], report["run"], report["alive"], report["arch"]) == (
            True,
            True,
            True,
            "sm_90",
        )
        assert report["last_heard_at"] and body["grading"] == "ok"
        # Anyone may ask: host names are for the staff page only.
        assert "gpu-host" not in json.dumps(body)
    finally:
        workers.mark_stopped(name)
    body = (await client.get("/api/v1/health")).json()
    stopped = [w for w in body["workers"] if w["id"] == report["id"]]
    assert stopped and stopped[0]["stopped"] and not stopped[0]["alive"]


async def test_openapi_docs_list_the_endpoints(client: httpx.AsyncClient) -> None:
    assert (await client.get("/docs")).status_code == 200
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert "/api/v1/courses/{course}/labs/{lab}/submissions" in paths
    assert "/api/v1/courses/{course}/gradebook.csv" in paths


async def test_submit_returns_202_and_stores_the_row_before_the_job(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    r = await submit(client, world, world.student)
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["status"] == "queued"
    assert body["url"] == f"/submissions/{body['id']}"
    row = session.get_one(Submission, body["id"])
    assert row.source_text == GOOD_KERNEL
    assert row.filename == "scale.cu"
    assert len(row.sha256) == 64
    job = session.scalars(select(GradingJob).where(GradingJob.submission_id == row.id)).one()
    assert job.state == JobState.queued.value
    assert job.sent_at is not None  # the broker took it after the commit
    assert job.sent_queue == "grading"
    events = session.scalars(
        select(SubmissionEvent.status).where(SubmissionEvent.submission_id == row.id)
    ).all()
    assert events == ["queued"]


async def test_submission_detail_has_the_documented_fields(
    client: httpx.AsyncClient, world: World
) -> None:
    sid = (await submit(client, world, world.student)).json()["id"]
    r = await client.get(f"/api/v1/submissions/{sid}", headers=world.student.auth)
    assert r.status_code == 200
    body = r.json()
    for key in ("id", "lab", "status", "score", "max_score", "compile_log", "cases"):
        assert key in body
    assert body["created_at"] and body["graded_at"] is None
    assert body["lab"] == world.lab.slug
    assert body["max_score"] == 10.0
    assert body["queue_position"] >= 1


@pytest.mark.parametrize(
    ("who", "expected"),
    [("student", 200), ("ta", 200), ("instructor", 200), ("outsider", 403), (None, 401)],
)
async def test_access_to_course_labs(
    client: httpx.AsyncClient, world: World, who: str | None, expected: int
) -> None:
    headers = getattr(world, who).auth if who else {}
    r = await client.get(f"/api/v1/courses/{world.course.slug}/labs", headers=headers)
    assert r.status_code == expected, r.text
    if expected == 200:
        assert [lab["slug"] for lab in r.json()] == ["scale-test"]
    else:
        assert isinstance(r.json()["detail"], str) and r.json()["detail"].endswith(".")


@pytest.mark.parametrize(
    ("who", "expected"),
    [("student", 202), ("ta", 202), ("instructor", 202), ("outsider", 403)],
)
async def test_access_to_submit(
    client: httpx.AsyncClient, world: World, who: str, expected: int
) -> None:
    r = await submit(client, world, getattr(world, who))
    assert r.status_code == expected, r.text


async def test_submit_without_a_token_is_401(client: httpx.AsyncClient, world: World) -> None:
    r = await client.post(submit_url(world), files={"file": ("a.cu", b"x", "text/plain")})
    assert r.status_code == 401
    assert "Bearer" in r.json()["detail"]


async def test_a_bad_token_is_401(client: httpx.AsyncClient, world: World) -> None:
    r = await client.get(
        f"/api/v1/courses/{world.course.slug}/labs", headers={"Authorization": "Bearer kg_nope"}
    )
    assert r.status_code == 401
    assert "not valid" in r.json()["detail"]


@pytest.mark.parametrize(
    ("who", "expected"),
    [
        ("student", 200),
        ("other_student", 404),
        ("ta", 200),
        ("instructor", 200),
        ("outsider", 404),
    ],
)
async def test_access_to_a_submission(
    client: httpx.AsyncClient, world: World, who: str, expected: int
) -> None:
    sid = (await submit(client, world, world.student)).json()["id"]
    r = await client.get(f"/api/v1/submissions/{sid}", headers=getattr(world, who).auth)
    assert r.status_code == expected
    if expected == 404:
        assert r.json() == {"detail": f"There is no submission {sid} that you may see."}


@pytest.mark.parametrize(
    ("who", "expected"),
    [("student", 403), ("ta", 200), ("instructor", 200), ("outsider", 403)],
)
async def test_access_to_course_submissions(
    client: httpx.AsyncClient, world: World, who: str, expected: int
) -> None:
    await submit(client, world, world.student)
    await submit(client, world, world.other_student)
    r = await client.get(
        f"/api/v1/courses/{world.course.slug}/submissions", headers=getattr(world, who).auth
    )
    assert r.status_code == expected
    if expected == 200:
        assert {item["user"] for item in r.json()} == {
            world.student.email,
            world.other_student.email,
        }
    else:
        assert "detail" in r.json()


async def test_course_submissions_filter_by_lab_and_user(
    client: httpx.AsyncClient, world: World
) -> None:
    await submit(client, world, world.student)
    await submit(client, world, world.other_student)
    url = f"/api/v1/courses/{world.course.slug}/submissions"
    r = await client.get(
        url, params={"lab": world.lab.slug, "user": world.student.email}, headers=world.ta.auth
    )
    assert [item["user"] for item in r.json()] == [world.student.email]
    r = await client.get(url, params={"lab": "no-such-lab"}, headers=world.ta.auth)
    assert r.status_code == 404


@pytest.mark.parametrize(
    ("who", "expected"),
    [("student", 403), ("ta", 200), ("instructor", 200), ("outsider", 403)],
)
async def test_access_to_gradebook_csv(
    client: httpx.AsyncClient, world: World, who: str, expected: int
) -> None:
    r = await client.get(
        f"/api/v1/courses/{world.course.slug}/gradebook.csv", headers=getattr(world, who).auth
    )
    assert r.status_code == expected
    if expected == 200:
        assert r.headers["content-type"].startswith("text/csv")
        assert (
            r.text.splitlines()[0]
            == "student_id,name,email,scale-test,scale-test_late,scale-test_pending,total"
        )


async def test_unknown_course_is_404(client: httpx.AsyncClient, world: World) -> None:
    r = await client.get("/api/v1/courses/nope/labs", headers=world.student.auth)
    assert r.status_code == 404
    assert r.json() == {"detail": "There is no course named nope."}


async def test_too_large_upload_is_413(client: httpx.AsyncClient, world: World) -> None:
    # Exactly at the documented 256 KiB: accepted; one byte more: refused with a sentence.
    at_limit = await submit(client, world, world.student, body=b"/" * (256 * 1024))
    assert at_limit.status_code == 202, at_limit.text
    r = await submit(client, world, world.student, body=b"/" * (256 * 1024 + 1))
    assert r.status_code == 413
    assert r.json()["detail"] == (
        "The file is 262145 bytes (256 KiB), over the limit of 262144 bytes (256 KiB); submit "
        "only the kernel's .cu source file."
    )


@pytest.mark.parametrize(
    ("body", "words"),
    [(b"", "empty"), (b"  \n", "empty"), (b"\xff\xfe\x00k", "not UTF-8"), (b"a\x00b", "NUL")],
)
async def test_unreadable_uploads_are_refused_with_a_reason(
    client: httpx.AsyncClient, world: World, body: bytes, words: str
) -> None:
    r = await submit(client, world, world.student, body=body)
    assert r.status_code == 422
    assert words in r.json()["detail"]


async def test_the_filename_is_never_a_path(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    r = await submit(client, world, world.student, filename="../../etc/passwd.cu")
    assert r.status_code == 202
    assert session.get_one(Submission, r.json()["id"]).filename == "passwd.cu"


async def test_a_lab_not_yet_released_refuses(client: httpx.AsyncClient, session: Session) -> None:
    world = make_world(session, release_at=utcnow() + timedelta(days=1))
    r = await submit(client, world, world.student)
    assert r.status_code == 403
    assert "opens for submissions" in r.json()["detail"]
    # Staff try the lab out before it opens.
    assert (await submit(client, world, world.ta)).status_code == 202


async def test_after_the_due_date_a_submission_is_marked_late(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session, due_at=utcnow() - timedelta(hours=1))
    r = await submit(client, world, world.student)
    assert r.status_code == 202
    assert session.get_one(Submission, r.json()["id"]).late is True


async def test_after_the_due_date_a_refusing_lab_refuses(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session, due_at=utcnow() - timedelta(hours=1), late_policy=LatePolicy.refuse)
    r = await submit(client, world, world.student)
    assert r.status_code == 403
    assert "does not accept late submissions" in r.json()["detail"]
    assert (await submit(client, world, world.instructor)).status_code == 202


async def test_hidden_cases_show_only_pass_or_fail_to_students_until_the_due_date(
    client: httpx.AsyncClient, session: Session
) -> None:
    from app.grading.record import record_report
    from graders.results import CaseResult as GradedCase
    from graders.results import GradeReport

    world = make_world(session, due_at=utcnow() + timedelta(days=1))
    sid = (await submit(client, world, world.student)).json()["id"]
    submission = session.get_one(Submission, sid)
    job = session.scalars(select(GradingJob).where(GradingJob.submission_id == sid)).one()
    cases = [
        GradedCase(
            name="n-1000",
            sizes={"n": 1000},
            hidden=False,
            passed=True,
            verdict="pass",
            message="ok",
            points=6,
            max_points=6,
        ),
        GradedCase(
            name="n-1048579",
            sizes={"n": 1048579},
            hidden=True,
            passed=False,
            verdict="wrong_answer",
            message="dst[1048578]: expected 1, got 0.",
            max_points=4,
        ),
    ]
    report = GradeReport(lab="scale-test", cases=cases, score=6, max_score=10)
    record_report(session, submission=submission, job=job, report=report)
    session.commit()

    mine = (await client.get(f"/api/v1/submissions/{sid}", headers=world.student.auth)).json()
    assert mine["status"] == "graded" and mine["score"] == 6
    visible, hidden = mine["cases"]
    assert visible["message"] == "ok" and visible["sizes"] == {"n": 1000}
    assert hidden == {
        "name": "n-1048579",
        "hidden": True,
        "passed": False,
        "sizes": None,
        "verdict": None,
        "message": None,
        "points": None,
        "max_points": None,
        "seed": None,
        "errors": None,
        "timings": None,
    }
    staff = (await client.get(f"/api/v1/submissions/{sid}", headers=world.ta.auth)).json()
    assert staff["cases"][1]["message"] == "dst[1048578]: expected 1, got 0."
    # After the due date the student sees the details too.
    world.lab.due_at = utcnow() - timedelta(seconds=1)
    session.commit()
    after = (await client.get(f"/api/v1/submissions/{sid}", headers=world.student.auth)).json()
    assert after["cases"][1]["verdict"] == "wrong_answer"


async def test_a_huge_body_is_refused_before_it_is_read(
    client: httpx.AsyncClient, world: World
) -> None:
    huge = b"/" * (2 * 1024 * 1024)
    r = await client.post(
        submit_url(world), headers=world.student.auth, files={"file": ("k.cu", huge)}
    )
    assert r.status_code == 413
    assert "(2.0 MiB), over the limit of 262144 bytes" in r.json()["detail"]

    async def chunks():  # no Content-Length: the limit counts the bytes as they arrive
        yield b'--b\r\nContent-Disposition: form-data; name="file"; filename="k.cu"\r\n\r\n'
        for _ in range(64):
            yield b"x" * 65536

    r = await client.post(
        submit_url(world),
        headers={**world.student.auth, "content-type": "multipart/form-data; boundary=b"},
        content=chunks(),
    )
    assert r.status_code == 413
    assert r.json()["detail"].startswith("The upload is larger than that, over the limit of")


async def test_hidden_cases_leak_through_no_other_field_before_the_due_date(
    client: httpx.AsyncClient, session: Session
) -> None:
    from app.grading.record import record_report
    from graders.results import CaseResult as GradedCase
    from graders.results import GradeReport

    world = make_world(session, due_at=utcnow() + timedelta(days=1))
    sid = (await submit(client, world, world.student)).json()["id"]
    submission = session.get_one(Submission, sid)
    job = session.scalars(select(GradingJob).where(GradingJob.submission_id == sid)).one()
    cases = [
        GradedCase("n-1000", {"n": 1000}, False, True, "pass", "ok", points=6, max_points=6),
        GradedCase(
            "secret-case", {"n": 1048579}, True, False, "out_of_bounds_write", "past dst", 0, 4
        ),
    ]
    # As an engine that names the first failure's verdict wrote it (rows graded before the
    # engine stopped naming a hidden case's verdict keep that text).
    summary = "1 of 2 cases passed; the first failure is secret-case (out of bounds write)."
    # The kernel printed its size argument in every case, the hidden one included.
    report = GradeReport(
        lab="scale-test",
        cases=cases,
        score=6,
        max_score=10,
        summary=summary,
        stdout="n = 1000\nn = 1048579\n",
    )
    record_report(session, submission=submission, job=job, report=report)
    session.commit()

    mine = (await client.get(f"/api/v1/submissions/{sid}", headers=world.student.auth)).json()
    shown = " ".join(
        [mine["summary"], mine["status_message"], mine["stdout"]]
        + [change["message"] for change in mine["history"]]
    )
    assert "1048579" not in shown and "out of bounds" not in shown, shown
    assert "secret-case" in mine["summary"]  # the name is shown, as in the cases table
    from tests.app.web.test_routes import login

    await login(client, world.student)
    page = (await client.get(f"/submissions/{sid}")).text
    assert "1048579" not in page and "out of bounds" not in page
    # Staff see everything, and so does the student once the lab is due.
    staff = (await client.get(f"/api/v1/submissions/{sid}", headers=world.ta.auth)).json()
    assert "1048579" in staff["stdout"] and "out of bounds" in staff["summary"]
    world.lab.due_at = utcnow() - timedelta(seconds=1)
    session.commit()
    after = (await client.get(f"/api/v1/submissions/{sid}", headers=world.student.auth)).json()
    assert "1048579" in after["stdout"] and "out of bounds" in after["summary"]


async def test_a_broker_that_does_not_answer_holds_up_no_upload(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    import asyncio

    from app.jobs.sender import job_sender
    from tests.app.scaled import SilentPort, free_port, sending_through

    # A Redis URL whose port takes connections and never answers (a dead network path).
    port = free_port()
    silent = SilentPort(port)
    with sending_through(f"redis://127.0.0.1:{port}/0"):
        try:
            # Bounded, so that an upload that waited on this broker fails the test, not hangs it.
            r = await asyncio.wait_for(submit(client, world, world.student), timeout=30)
            # Answered, stored, while the send still waits on the broker.
            assert r.status_code == 202, r.text
            assert not job_sender.wait_sent(0)
            assert (await client.get("/api/v1/health")).status_code == 200
        finally:
            # The broker goes away for good: the send fails, and its stamp is taken back.
            silent.close()
        assert job_sender.wait_sent(60)
    sid = r.json()["id"]
    job = session.scalars(select(GradingJob).where(GradingJob.submission_id == sid)).one()
    # Left for the sweeper to send, on the queue it belongs on.
    assert (job.state, job.sent_at, job.sent_queue) == (JobState.queued.value, None, "grading")


async def test_a_database_hiccup_after_the_send_still_answers_202(
    client: httpx.AsyncClient, world: World, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextlib import contextmanager

    from sqlalchemy.exc import OperationalError

    from app.jobs import send

    @contextmanager
    def locked_database():  # type: ignore[no-untyped-def]
        raise OperationalError("UPDATE grading_jobs", {}, Exception("database is locked"))
        yield

    # The submission is committed and the broker took the job; only noting the send fails.
    monkeypatch.setattr(send, "session_scope", locked_database)
    r = await submit(client, world, world.student)
    assert r.status_code == 202, r.text
    sid = r.json()["id"]
    job = session.scalars(select(GradingJob).where(GradingJob.submission_id == sid)).one()
    assert job.state == JobState.queued.value  # the sweeper sends it again; a repeat is harmless


async def test_after_a_regrade_fails_to_compile_the_old_cases_are_not_shown_as_its_result(
    client: httpx.AsyncClient, session: Session
) -> None:
    from app.grading.record import record_compile, record_report
    from graders.results import CaseResult as GradedCase
    from graders.results import CompileResult, GradeReport

    world = make_world(session)
    sid = (await submit(client, world, world.student)).json()["id"]
    submission = session.get_one(Submission, sid)
    first = session.scalars(select(GradingJob).where(GradingJob.submission_id == sid)).one()
    case = GradedCase("n-1000", {"n": 1000}, False, True, "pass", "ok", points=10, max_points=10)
    report = GradeReport(lab="scale-test", cases=[case], score=10, max_score=10)
    record_report(session, submission=submission, job=first, report=report)
    session.commit()
    r = await client.post(f"/api/v1/submissions/{sid}/regrade", headers=world.ta.auth)
    assert r.status_code == 202
    second = session.scalars(
        select(GradingJob).where(GradingJob.submission_id == sid, GradingJob.id != first.id)
    ).one()
    # The lab changed since, and the regrade no longer compiles.
    failed = CompileResult(
        ok=False, reason="compile_error", message="1 error.", log="scale.cu(4): error: x"
    )
    record_compile(session, submission=submission, job=second, result=failed)
    session.commit()
    mine = (await client.get(f"/api/v1/submissions/{sid}", headers=world.student.auth)).json()
    assert mine["status"] == "compile_error" and mine["score"] == 0
    assert mine["cases"] == []  # not the first grading's passing case beside a score of 0
