"""What a unit of work tells the world waits for its commit: a job goes to the broker only once
its rows are there, never after a rollback, and a refused send is taken back on the row."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import after_commit
from app.courses.service import add_lab
from app.jobs.celery_app import QUEUE, celery_app
from app.jobs.send import waiting_in_broker
from app.jobs.sender import job_sender
from app.similarity.models import ReportState, SimilarityReport
from tests.app.conftest import make_world

pytestmark = pytest.mark.anyio


def test_an_action_runs_once_at_the_commit_and_never_after_a_rollback(session: Session) -> None:
    ran: list[str] = []
    after_commit(session, lambda: ran.append("first"))
    with session.begin_nested():
        after_commit(session, lambda: ran.append("in a savepoint"))
    assert ran == []  # a savepoint's commit is not the unit of work's
    session.commit()
    assert ran == ["first", "in a savepoint"]
    session.commit()
    assert ran == ["first", "in a savepoint"]  # once
    after_commit(session, lambda: ran.append("rolled back"))
    session.rollback()
    session.commit()
    assert ran == ["first", "in a savepoint"]


def test_one_failing_action_does_not_stop_the_others(session: Session) -> None:
    ran: list[str] = []

    def broken() -> None:
        raise RuntimeError("the broker's client broke")

    after_commit(session, broken)
    after_commit(session, lambda: ran.append("next"))
    session.commit()
    assert ran == ["next"]


def _waiting() -> int:
    counts = waiting_in_broker([QUEUE])
    assert counts is not None, "the test broker did not answer"
    return counts[QUEUE]


async def test_a_report_asked_for_goes_to_the_broker_once_its_request_commits(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    lab = add_lab(session, course=world.course, ref="vector-scale")
    session.commit()
    assert job_sender.wait_sent(60)
    celery_app.control.purge()
    url = f"/api/v1/courses/{world.course.slug}/labs/{lab.slug}/similarity"
    refused = await client.post(url, headers=world.student.auth, json={})
    assert refused.status_code == 403  # the request rolled back: nothing stored, nothing sent
    assert job_sender.wait_sent(60)
    assert _waiting() == 0
    asked = await client.post(url, headers=world.ta.auth, json={})
    assert asked.status_code == 202, asked.text
    assert job_sender.wait_sent(60)
    assert _waiting() == 1
    celery_app.control.purge()


async def test_a_send_the_broker_refuses_takes_its_stamp_back(
    client: httpx.AsyncClient, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = make_world(session)
    lab = add_lab(session, course=world.course, ref="vector-scale")
    session.commit()

    def broker_away(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("the broker is restarting")

    monkeypatch.setattr(celery_app, "send_task", broker_away)
    url = f"/api/v1/courses/{world.course.slug}/labs/{lab.slug}/similarity"
    asked = await client.post(url, headers=world.ta.auth, json={})
    assert asked.status_code == 202, asked.text
    assert job_sender.wait_sent(60)
    report = session.scalars(
        select(SimilarityReport).where(SimilarityReport.id == asked.json()["id"])
    ).one()
    # Queued and not sent: the workers' sweep sends it (app.similarity.sweep).
    assert (report.state, report.sent_at) == (ReportState.queued.value, None)
