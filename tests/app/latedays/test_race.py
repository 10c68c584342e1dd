"""Two late submissions of two labs, uploaded and graded at once, with one late day left: it is
spent once, on SQLite and on PostgreSQL (KERNELGRADER_TEST_POSTGRES_URL; CI sets it, elsewhere
skipped). The gradings run in whatever order the database lets them; test_race_postgres.py
forces the worst one on PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.service import add_lab
from app.grading.models import GradingJob
from app.grading.tasks import grade
from tests.app.conftest import make_world
from tests.app.latedays.test_race_postgres import _upload
from tests.app.scaled import BACKENDS, migrated_database

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module", params=BACKENDS)
def backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    with migrated_database(request.param, tmp_path_factory.mktemp("latedays-race")):
        yield request.param


async def test_two_labs_graded_at_once_spend_the_last_day_once(
    backend: str, client: httpx.AsyncClient, session: Session
) -> None:
    assert session.get_bind().dialect.name == backend
    world = make_world(session, due_at=utcnow() - timedelta(hours=2))
    second = add_lab(
        session, course=world.course, ref="vector-scale", due_at=utcnow() - timedelta(hours=3)
    )
    world.course.late_days = 1
    session.commit()
    course = world.course.slug
    ids = await asyncio.gather(
        _upload(client, course, world.lab.slug, world.student.auth),
        _upload(client, course, second.slug, world.student.auth),
    )
    jobs = {
        sid: session.scalars(select(GradingJob.id).where(GradingJob.submission_id == sid)).one()
        for sid in ids
    }
    session.rollback()
    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(lambda sid: grade.apply(args=[sid, jobs[sid]]).get(), ids))
    assert outcomes == ["compile_error", "compile_error"]
    r = await client.get(f"/api/v1/courses/{course}/late-days/me", headers=world.student.auth)
    mine = r.json()
    assert (mine["spent"], mine["left"]) == (1, 0), mine
    assert sorted(u["days_spent"] for u in mine["labs"]) == [0, 1]
    assert [e["kind"] for e in mine["history"]] == ["spend"]
