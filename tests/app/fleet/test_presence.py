"""A worker's presence: its beats say when it last held a task, and bring back the fleet's
request to drain, which it acts on once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.core.database import session_scope, utcnow
from app.grading.tasks import grade
from app.jobs.models import Worker
from app.jobs.presence import FLEET_JOB_VARIABLE, Activity, announce
from tests.app.conftest import unique
from tests.app.scaled import settings_from


@pytest.fixture
def fast_beats() -> Iterator[None]:
    with settings_from(heartbeat_seconds="0.05"):
        yield


def _row(session: Session, name: str) -> Worker:
    session.expire_all()
    return session.scalars(select(Worker).where(Worker.name == name)).one()


def _wait(what: str, check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} within {timeout:g} s"
        time.sleep(0.02)


def test_a_drain_request_reaches_the_worker_once(
    session: Session, fast_beats: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FLEET_JOB_VARIABLE, "slurm:4711")
    drains: list[float] = []
    asked = threading.Event()

    def on_drain() -> None:
        drains.append(time.monotonic())
        asked.set()

    name = unique("node7:")
    presence = announce(
        name=name, gpu_model="", arch="sm_90", can_run=False, note="", queues=["grading"],
        on_drain=on_drain,
    )  # fmt: skip
    try:
        assert _row(session, name).fleet_job == "slurm:4711"
        time.sleep(0.3)  # beats, with nothing asked
        assert not drains
        with session_scope() as s:
            s.execute(update(Worker).where(Worker.name == name).values(drain_at=utcnow()))
        assert asked.wait(10), "the drain request did not reach the worker"
        time.sleep(0.3)  # more beats: the request stays, the worker was told once
        assert len(drains) == 1 and presence.draining
    finally:
        presence.close()
    assert _row(session, name).stopped_at is not None


def test_beats_say_when_the_worker_last_held_a_task(session: Session, fast_beats: None) -> None:
    activity = Activity()
    activity.connect()
    name = unique("node8:")
    presence = announce(
        name=name, gpu_model="", arch="sm_90", can_run=False, note="", queues=["grading"],
        activity=activity,
    )  # fmt: skip
    try:
        time.sleep(0.3)
        assert _row(session, name).busy_at is None, "idle since it started"
        before = utcnow()
        # A task run through Celery (here in this process): its signals mark the worker busy.
        assert grade.apply(args=[10**9, 10**9]).get() == "missing"
        ended = activity.busy_at()
        assert ended is not None and before <= ended <= utcnow()
        _wait("the beat writing busy_at", lambda: _row(session, name).busy_at == ended)
        time.sleep(0.3)
        assert _row(session, name).busy_at == ended, "idle again: busy_at stays at the task's end"
        # While a task runs, each beat says "busy now".
        activity.started()
        _wait("a beat saying busy now", lambda: _busy(session, name) > ended)
        first = _busy(session, name)
        _wait("a later beat", lambda: _busy(session, name) > first)
        activity.finished()
    finally:
        presence.close()
        activity.disconnect()


def _busy(session: Session, name: str) -> datetime:
    busy = _row(session, name).busy_at
    assert busy is not None
    return busy
