"""The late-day race on PostgreSQL: two late submissions that come to count at the same moment
(two workers recording their gradings in parallel) spend the budget once. Needs the server of
KERNELGRADER_TEST_POSTGRES_URL (scripts/ci-services.sh); skipped with that hint elsewhere,
failing under CI without it.

The submissions hold no days of their own (made as main's uploads were, before late days were
held at upload: test_holds_race.py races the uploads themselves), so only the student's turn at
their days stands between the two gradings. Both are made to reach that turn together (a
barrier in front of `take_turn`, the real lock after it), so the test fails whenever the turn
does not serialize them: with the lock removed, both read one day left and both spend it.

Not on SQLite: there a grading holds the database's one write lock from its first write (its
cases, long before its late days), so the second grading waits before the barrier and the two
never meet; the race cannot happen there.
"""

from __future__ import annotations

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
from app.courses.models import Lab
from app.courses.service import add_lab
from app.latedays.models import LateDayCharge, LateDayEvent
from app.submissions.models import JobState, Status
from tests.app.conftest import World, make_world
from tests.app.factories import make_submission
from tests.app.latedays.helpers import record_graded
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


def _late(session: Session, world: World, lab: Lab) -> int:
    """A late upload waiting for its verdict, as main stored one (no days held)."""
    assert lab.due_at is not None
    sub, _ = make_submission(
        session,
        user=world.student.user,
        lab=lab,
        status=Status.queued,
        job_state=JobState.queued,
        created_at=lab.due_at + timedelta(minutes=30),
        late=True,
    )
    session.commit()
    return sub.id


def _grade_together(session: Session, ids: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    session.rollback()
    barrier = threading.Barrier(len(ids), timeout=120)
    real = latedays_service.take_turn

    def meet_then_take_turn(s: Session, *, course_id: int, user_id: int) -> None:
        barrier.wait()
        real(s, course_id=course_id, user_id=user_id)

    monkeypatch.setattr(latedays_service, "take_turn", meet_then_take_turn)
    with ThreadPoolExecutor(len(ids)) as pool:
        list(pool.map(lambda sid: record_graded(sid, score=7), ids))


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
    ids = [_late(session, world, world.lab), _late(session, world, second)]
    _grade_together(session, ids, monkeypatch)
    mine = await _spent(client, course, world.student.auth)
    assert (mine["spent"], mine["left"]) == (1, 0), mine
    assert sorted(u["days_spent"] for u in mine["labs"]) == [0, 1]
    assert [e["kind"] for e in mine["history"]] == ["spend"]
    # The gradebook agrees: one lab covered, the other late.
    book = await client.get(
        f"/api/v1/courses/{course}/gradebook.csv", headers=world.instructor.auth
    )
    row = next(line for line in book.text.splitlines() if world.student.email in line)
    cells = row.split(",")[3:]
    # Per lab: score, late, pending, late days; then late_days_left and the total.
    assert sorted([cells[0:4], cells[4:8]]) == [["7", "0", "0", "1"], ["7", "1", "0", "0"]]
    assert cells[8:] == ["0", "14"]


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
    ids = [_late(session, world, world.lab), _late(session, world, world.lab)]
    _grade_together(session, ids, monkeypatch)
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
