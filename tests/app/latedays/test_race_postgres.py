"""The late-day race on PostgreSQL: two late submissions that come to count at the same moment
(two workers recording their gradings in parallel, after two parallel uploads) spend the budget
once. Needs the server of KERNELGRADER_TEST_POSTGRES_URL (scripts/ci-services.sh); skipped with
that hint elsewhere, failing under CI without it.

Both gradings are made to reach the student's turn at their late days together (a barrier in
front of `take_turn`, the real lock after it), so the test fails whenever that turn does not
serialize them: with the lock removed, both read one day left and both spend it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

import app.latedays.service as latedays_service
from app.cli.database import upgrade_database
from app.core.database import utcnow
from app.courses.service import add_lab
from app.grading.models import GradingJob
from app.grading.tasks import grade
from app.latedays.models import LateDayCharge, LateDayEvent
from tests.app.conftest import make_world
from tests.app.grading.test_worker import SYNTAX_ERROR
from tests.app.scaled import (
    POSTGRES_VAR,
    fresh_database,
    required_url,
    sending_through,
    settings_from,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def on_postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = required_url(POSTGRES_VAR)
    broker = tmp_path_factory.mktemp("latedays-broker") / "broker.sqlite"
    with fresh_database(server) as url, settings_from(database_url=url):
        upgrade_database()
        with sending_through(f"sqla+sqlite:///{broker}"):
            yield url


async def _upload(client: httpx.AsyncClient, course: str, lab: str, auth: dict[str, str]) -> int:
    r = await client.post(
        f"/api/v1/courses/{course}/labs/{lab}/submissions",
        headers=auth,
        files={"file": ("broken.cu", SYNTAX_ERROR.encode(), "text/plain")},
    )
    assert r.status_code == 202, r.text
    return int(r.json()["id"])


def _grade_together(session: Session, ids: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = {
        sid: session.scalars(select(GradingJob.id).where(GradingJob.submission_id == sid)).one()
        for sid in ids
    }
    session.rollback()
    barrier = threading.Barrier(len(ids), timeout=120)
    real = latedays_service.take_turn

    def meet_then_take_turn(s: Session, *, course_id: int, user_id: int) -> None:
        barrier.wait()
        real(s, course_id=course_id, user_id=user_id)

    monkeypatch.setattr(latedays_service, "take_turn", meet_then_take_turn)
    with ThreadPoolExecutor(len(ids)) as pool:
        outcomes = list(pool.map(lambda sid: grade.apply(args=[sid, jobs[sid]]).get(), ids))
    # A compile error is a verdict: each one counts (0 points), late.
    assert outcomes == ["compile_error"] * len(ids)


async def _spent(client: httpx.AsyncClient, course: str, auth: dict[str, str]) -> dict:
    r = await client.get(f"/api/v1/courses/{course}/late-days/me", headers=auth)
    assert r.status_code == 200, r.text
    return r.json()


async def test_two_labs_counted_at_once_spend_the_last_day_once(
    on_postgres: str,
    client: httpx.AsyncClient,
    session: Session,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert session.get_bind().dialect.name == "postgresql"
    world = make_world(session, due_at=utcnow() - timedelta(hours=2))
    second = add_lab(
        session, course=world.course, ref="vector-scale", due_at=utcnow() - timedelta(hours=3)
    )
    session.commit()
    course = world.course.slug
    r = await client.patch(
        f"/api/v1/courses/{course}/policies", headers=world.instructor.auth, json={"late_days": 1}
    )
    assert r.status_code == 200, r.text
    ids = await asyncio.gather(
        _upload(client, course, world.lab.slug, world.student.auth),
        _upload(client, course, second.slug, world.student.auth),
    )
    _grade_together(session, list(ids), monkeypatch)
    mine = await _spent(client, course, world.student.auth)
    assert (mine["spent"], mine["left"]) == (1, 0), mine
    assert sorted(u["days_spent"] for u in mine["labs"]) == [0, 1]
    assert [e["kind"] for e in mine["history"]] == ["spend"]
    # The gradebook agrees: one lab covered, the other late.
    book = await client.get(
        f"/api/v1/courses/{course}/gradebook.csv", headers=world.instructor.auth
    )
    row = next(line for line in book.text.splitlines() if world.student.email in line)
    assert row.endswith(",0,0")  # late_days_left 0, total 0


async def test_two_submissions_of_one_lab_counted_at_once_charge_it_once(
    on_postgres: str,
    client: httpx.AsyncClient,
    session: Session,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = make_world(session, due_at=utcnow() - timedelta(hours=2))
    world.course.late_days = 3
    session.commit()
    course = world.course.slug
    ids = await asyncio.gather(
        _upload(client, course, world.lab.slug, world.student.auth),
        _upload(client, course, world.lab.slug, world.student.auth),
    )
    _grade_together(session, list(ids), monkeypatch)
    charges = session.scalars(
        select(LateDayCharge).where(LateDayCharge.user_id == world.student.user.id)
    ).all()
    assert [(c.lab_id, c.days) for c in charges] == [(world.lab.id, 1)]
    events = session.scalars(
        select(LateDayEvent.kind).where(LateDayEvent.user_id == world.student.user.id)
    ).all()
    assert events == ["spend"]
    mine = await _spent(client, course, world.student.auth)
    assert (mine["spent"], mine["left"]) == (1, 2)
