"""Reads load only what they show: no source text, logs or reports where they are not shown,
and a gradebook that reads one query's rows whatever the number of students."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session

from app.core.database import get_engine
from app.courses.models import Role
from app.grading.models import JobState
from app.submissions.models import Status
from tests.app.conftest import World, make_member, make_world
from tests.app.factories import make_submission

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
