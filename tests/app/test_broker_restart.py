"""Uploads never wait on the broker, and jobs a Redis restart lost go again in upload order.

The broker is a redis-server of the test's own (scaled.OwnRedis, without persistence, so that
a restart loses what it held, as in issue 16's rush), the database a fresh PostgreSQL database
on the CI server. Skipped with a hint where either is missing; failing under CI. No timing is
asserted: `bench/rush.py --setup scaled` prints the uploads' latency across a restart.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import redis
from sqlalchemy.orm import Session

from app.cli.database import upgrade_database
from app.core.database import utcnow
from app.core.settings import get_settings
from app.grading.sweeper import sweep
from app.grading.tasks import grade
from app.jobs.celery_app import QUEUE
from app.jobs.send import STAMP_MARGIN
from app.jobs.sender import job_sender
from app.submissions.models import GradingJob
from tests.app.conftest import World
from tests.app.factories import upload
from tests.app.scaled import (
    POSTGRES_VAR,
    OwnRedis,
    SilentPort,
    fresh_database,
    redis_server,
    required_url,
    sending_through,
    settings_from,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

# Every wait below is bounded: a sender that never finishes fails the test, not hangs it.
SENDER_WAIT_SECONDS = 60.0


@pytest.fixture(autouse=True)
def fresh_postgres() -> Iterator[str]:
    """A database of this test's own: whether a queue moved past a job is read from all jobs."""
    with fresh_database(required_url(POSTGRES_VAR)) as url, settings_from(database_url=url):
        upgrade_database()
        yield url


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    server = OwnRedis(redis_server(), tmp_path)
    try:
        yield server
    finally:
        server.kill()


def waiting(url: str) -> list[tuple[int, int, str]]:
    """(submission id, job id, send stamp) of each message on the main queue, next first."""
    client = redis.Redis.from_url(url)
    try:
        raw = client.lrange(QUEUE, 0, -1)
    finally:
        client.close()
    # kombu pushes a message on the list's left and a worker takes it from the right.
    return [_job_of(item) for item in reversed(raw)]


def take_next(url: str) -> tuple[int, int, str]:
    """Take the next message off the main queue, as a worker does."""
    client = redis.Redis.from_url(url)
    try:
        item = client.rpop(QUEUE)
    finally:
        client.close()
    assert item is not None, "the queue is empty"
    return _job_of(item)


def _job_of(item: bytes) -> tuple[int, int, str]:
    message = json.loads(item)
    args, kwargs, _ = json.loads(base64.b64decode(message["body"]))
    return int(args[0]), int(args[1]), str(kwargs["sent_at"])


def overdue() -> timedelta:
    """Past the time a sent job may wait unstarted before the sweep may judge it lost."""
    return timedelta(seconds=get_settings().resend_unstarted_after_seconds + 1)


async def test_an_upload_is_answered_while_the_broker_does_not_answer_and_sent_once_it_is_back(
    own_redis: OwnRedis, client: httpx.AsyncClient, world: World, session: Session
) -> None:
    # The broker's port takes connections and never answers: a send waits as long as that.
    silent = SilentPort(own_redis.port)
    with sending_through(own_redis.url):
        try:
            # Bounded, so that an upload that waited on this broker fails the test, not hangs it.
            _, job_id = await asyncio.wait_for(upload(client, world, session), timeout=30)
            # Answered (202, stored) while its send still waits on the broker.
            assert not job_sender.wait_sent(0)
            assert session.get_one(GradingJob, job_id).sent_at is not None
        finally:
            silent.close()
        own_redis.start()
        assert job_sender.wait_sent(SENDER_WAIT_SECONDS)
        # Sent by the sender's own retry, or, where the broker refused it, by a sweep.
        for _ in range(20):
            if waiting(own_redis.url):
                break
            sweep(now=utcnow() + timedelta(seconds=get_settings().resend_after_seconds + 1))
        assert [job for _, job, _ in waiting(own_redis.url)] == [job_id]


async def test_jobs_a_redis_restart_lost_are_sent_again_in_upload_order(
    own_redis: OwnRedis, client: httpx.AsyncClient, world: World, session: Session
) -> None:
    own_redis.start()
    with sending_through(own_redis.url):
        lost = [(await upload(client, world, session))[1] for _ in range(3)]
        assert job_sender.wait_sent(SENDER_WAIT_SECONDS)
        assert [job for _, job, _ in waiting(own_redis.url)] == lost
        # Redis goes down: uploads are still answered, and their sends are taken back.
        own_redis.kill()
        unsent = [(await upload(client, world, session))[1] for _ in range(2)]
        assert job_sender.wait_sent(SENDER_WAIT_SECONDS)
        session.expire_all()
        assert all(session.get_one(GradingJob, job).sent_at is None for job in unsent)
        # Back, without what it held. Uploads go on, stamped more than the margin later.
        own_redis.start()
        assert waiting(own_redis.url) == []
        time.sleep(STAMP_MARGIN.total_seconds() + 0.2)
        backlog = [(await upload(client, world, session))[1] for _ in range(3)]
        assert job_sender.wait_sent(SENDER_WAIT_SECONDS)
        # A worker takes the next message, the first upload after the restart.
        sid, job_id, stamp = take_next(own_redis.url)
        assert job_id == backlog[0]
        grade.apply(args=[sid, job_id], kwargs={"sent_at": stamp, "queue": QUEUE}).get()
        # Two uploads still wait, yet the queue has moved past the lost jobs: they go again now,
        # not once the backlog has drained, and with the jobs never sent, in upload order.
        report = sweep(now=utcnow() + overdue())
    assert (report.lost, report.resent) == (lost, unsent)
    assert [job for _, job, _ in waiting(own_redis.url)] == [*backlog[1:], *lost, *unsent]
