"""Reads load only what they show: no source text, logs or reports where they are not shown,
and a gradebook that reads one query's rows whatever the number of students; the richer
submission page and API (timings, references timed, review flag, perf pictures, GPU model)
and the staff's lab roster and zip included."""

from __future__ import annotations

import csv
import io
import zipfile
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session

from app.core.database import get_engine
from app.courses.models import Role
from app.submissions.models import JobState, Status
from tests.app.conftest import World, make_member, make_world
from tests.app.factories import make_submission, make_timed_submission
from tests.app.web.test_routes import login

pytestmark = pytest.mark.anyio


class Statements:
    """The SQL the service sends while it is recorded."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, _conn: Any, _cursor: Any, statement: str, *args: Any) -> None:
        self.seen.append(" ".join(statement.split()).lower())

    def reading(self, column: str) -> list[str]:
        return [s for s in self.seen if s.startswith("select") and column in s.split(" from ")[0]]


@pytest.fixture
def statements() -> Iterator[Statements]:
    recorder = Statements()
    engine = get_engine()
    event.listen(engine, "before_cursor_execute", recorder)
    try:
        yield recorder
    finally:
        event.remove(engine, "before_cursor_execute", recorder)


def _graded(session: Session, world: World, count: int = 1) -> list[int]:
    ids = []
    for score in range(count):
        submission, _ = make_submission(
            session, user=world.student.user, lab=world.lab, score=score, job_state=JobState.done
        )
        submission.compile_log = "scale.cu(4): error: a long log " * 100
        ids.append(submission.id)
    session.commit()
    return ids


async def test_reading_a_submission_over_the_api_loads_no_source(
    client: httpx.AsyncClient, world: World, session: Session, statements: Statements
) -> None:
    (sid,) = _graded(session, world)
    statements.seen.clear()
    r = await client.get(f"/api/v1/submissions/{sid}", headers=world.student.auth)
    assert r.status_code == 200
    assert statements.seen, "nothing was recorded"
    assert statements.reading("source_text") == []
    # What it shows, it reads: the compile log is part of the answer.
    assert "a long log" in r.json()["compile_log"]


async def test_staff_lists_load_no_source_log_or_report(
    client: httpx.AsyncClient, world: World, session: Session, statements: Statements
) -> None:
    _graded(session, world, count=3)
    statements.seen.clear()
    r = await client.get(f"/api/v1/courses/{world.course.slug}/submissions", headers=world.ta.auth)
    assert r.status_code == 200 and len(r.json()) == 3
    for column in ("source_text", "compile_log", "report", "summary"):
        assert statements.reading(column) == [], column


async def test_the_gradebook_reads_one_query_of_counted_columns_whatever_the_course_size(
    client: httpx.AsyncClient, session: Session, statements: Statements
) -> None:
    small, large = make_world(session), make_world(session)
    for world, extra in ((small, 1), (large, 30)):
        for _ in range(extra):
            member = make_member(session, world.course, Role.student)
            make_submission(session, user=member.user, lab=world.lab, score=5)
            make_submission(session, user=member.user, lab=world.lab, status=Status.queued)
    session.commit()
    counts = []
    for world in (small, large):
        statements.seen.clear()
        r = await client.get(
            f"/api/v1/courses/{world.course.slug}/gradebook.csv", headers=world.ta.auth
        )
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/csv")
        table = list(csv.reader(io.StringIO(r.text)))
        # Every student has a row, graded or not: the two of make_world and the extra ones.
        assert len(table) == 1 + 2 + (1 if world is small else 30)
        assert all(row[3] in ("5", "") for row in table[1:])
        for column in ("source_text", "compile_log", "report", "summary", "status_message"):
            assert statements.reading(column) == [], column
        counts.append(len([s for s in statements.seen if s.startswith("select")]))
    assert counts[0] == counts[1], "the number of queries grew with the number of students"


async def test_a_timed_submission_reads_in_full_over_the_api_without_its_source(
    client: httpx.AsyncClient, world: World, session: Session, statements: Statements
) -> None:
    timed = make_timed_submission(session, user=world.student.user, lab=world.lab, median_ms=0.5)
    timed.review_flag = "Its median is far faster than any reference's; take a look."
    session.commit()
    statements.seen.clear()
    staff = (await client.get(f"/api/v1/submissions/{timed.id}", headers=world.ta.auth)).json()
    assert statements.reading("source_text") == []
    # What main's page and API show on top of the verdicts, read all the same.
    assert staff["gpu_model"] == "NVIDIA H100 80GB HBM3"
    assert {r["reference"] for r in staff["references_timed"]} == {"naive", "fast"}
    assert staff["cases"][0]["timings"]["kernel"]["median_ms"] == 0.5
    assert staff["review_flag"].startswith("Its median is far faster")
    student = await client.get(f"/api/v1/submissions/{timed.id}", headers=world.student.auth)
    assert student.json()["review_flag"] is None  # for staff only


async def test_the_submission_page_reads_its_source_once_for_the_lines_it_shows(
    client: httpx.AsyncClient, session: Session, statements: Statements
) -> None:
    world = make_world(session)
    make_timed_submission(session, user=world.other_student.user, lab=world.lab, median_ms=0.02)
    mine = make_timed_submission(session, user=world.student.user, lab=world.lab, median_ms=0.004)
    session.commit()
    await login(client, world.student)
    statements.seen.clear()
    page = (await client.get(f"/submissions/{mine.id}")).text
    # The page shows the source, so it reads it: once, by itself, not with every row.
    assert len(statements.reading("source_text")) == 1
    assert all("compile_log" not in s for s in statements.reading("source_text"))
    assert "__global__" in page  # the source lines
    assert page.split('id="performance"')[1].count("<svg") == 3  # the perf pictures


async def test_the_lab_roster_and_its_zip_read_sources_only_for_the_zip(
    client: httpx.AsyncClient, world: World, session: Session, statements: Statements
) -> None:
    _graded(session, world, count=2)
    base = f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}"
    statements.seen.clear()
    roster = await client.get(f"{base}/students", headers=world.ta.auth)
    assert roster.status_code == 200
    for column in ("source_text", "compile_log", "report", "summary"):
        assert statements.reading(column) == [], column
    statements.seen.clear()
    archive = await client.get(f"{base}/submissions.zip", headers=world.ta.auth)
    assert archive.status_code == 200 and archive.headers["content-type"] == "application/zip"
    # The counted sources in one read, whatever the number of students.
    assert len(statements.reading("source_text")) == 1
    with zipfile.ZipFile(io.BytesIO(archive.content)) as opened:
        assert any(name.endswith(".cu") for name in opened.namelist())


async def test_the_canvas_gradebook_and_the_pending_counts_come_from_the_same_one_query(
    client: httpx.AsyncClient, session: Session, statements: Statements
) -> None:
    small, large = make_world(session), make_world(session)
    for world, extra in ((small, 1), (large, 30)):
        for _ in range(extra):
            member = make_member(session, world.course, Role.student)
            make_submission(session, user=member.user, lab=world.lab, score=5)
            make_submission(session, user=member.user, lab=world.lab, status=Status.queued)
    session.commit()
    counts = []
    for world in (small, large):
        url = f"/api/v1/courses/{world.course.slug}/gradebook.csv"
        statements.seen.clear()
        ours = list(csv.reader(io.StringIO((await client.get(url, headers=world.ta.auth)).text)))
        lab = world.lab.slug
        assert ours[0][3:6] == [lab, f"{lab}_late", f"{lab}_pending"]
        # Each extra student: graded 5, one more on its way; make_world's two: nothing yet.
        assert sorted(row[3:6] for row in ours[1:])[-1] == ["5", "0", "1"]
        counts.append(len([s for s in statements.seen if s.startswith("select")]))
        statements.seen.clear()
        canvas = await client.get(url, params={"format": "canvas"}, headers=world.ta.auth)
        table = list(csv.reader(io.StringIO(canvas.text)))
        assert table[1][0] == "Points Possible" and len(table) == 2 + 2 + (
            1 if world is small else 30
        )
        for column in ("source_text", "compile_log", "report", "summary", "status_message"):
            assert statements.reading(column) == [], column
        counts.append(len([s for s in statements.seen if s.startswith("select")]))
    assert counts[0] == counts[2] and counts[1] == counts[3], counts


def test_a_submission_reads_in_three_queries(
    world: World, session: Session, statements: Statements
) -> None:
    from app.submissions.models import Submission
    from app.submissions.schemas import submission_read

    timed = make_timed_submission(session, user=world.student.user, lab=world.lab, median_ms=0.5)
    session.commit()
    for staff in (False, True):
        session.expire_all()
        submission = session.get_one(Submission, timed.id)
        statements.seen.clear()
        view = submission_read(session, submission=submission, viewer_is_staff=staff)
        assert view.cases and view.gpu_model == "NVIDIA H100 80GB HBM3"
        selects = [s for s in statements.seen if s.startswith("select")]
        # Its lab, course, author and jobs; its jobs' cases (and the hidden ones' names); its
        # history. Five before the reads were folded (the lab, the jobs, the cases, the hidden
        # cases' names, the history).
        assert len(selects) == 3, "\n".join(selects)


def test_a_student_reads_a_hidden_case_by_its_name_only_whichever_job_ran_it(
    world: World, session: Session
) -> None:
    from datetime import timedelta

    from app.core.database import utcnow
    from app.submissions.models import CaseResult, GradingJob
    from app.submissions.schemas import submission_read
    from app.submissions.service import set_status

    first_summary = "1 of 2 cases passed; the first failure is big-hidden (wrong answer)."
    submission, first = make_submission(session, user=world.student.user, lab=world.lab)
    first.attempt, first.finished_at = 1, utcnow() - timedelta(minutes=5)
    session.add(CaseResult(job_id=first.id, name="big-hidden", hidden=True, verdict="wrong_answer"))
    set_status(session, submission, Status.graded, first_summary)
    # A regrade ran only visible cases; the first grading's history still names the hidden one.
    again = GradingJob(
        submission_id=submission.id,
        state=JobState.done.value,
        attempt=1,
        queued_at=utcnow(),
        finished_at=utcnow(),
    )
    session.add(again)
    session.flush()
    session.add(CaseResult(job_id=again.id, name="small", passed=True, verdict="pass"))
    set_status(session, submission, Status.graded, "All cases passed.")
    session.commit()
    # The lab has no due date, so its grades (and hidden cases' details) are not released.
    student = submission_read(session, submission=submission, viewer_is_staff=False)
    assert [case.name for case in student.cases] == ["small"]
    history = " ".join(change.message for change in student.history)
    assert "big-hidden (hidden)" in history and "wrong answer" not in history
    staff = submission_read(session, submission=submission, viewer_is_staff=True)
    assert "big-hidden (wrong answer)" in " ".join(change.message for change in staff.history)
