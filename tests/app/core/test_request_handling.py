"""Request handling under load and faults: one thread hop, a bound on requests in flight, the
health check outside it, token use noted outside the request, and a database that is away
answered 503 with a sentence."""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.core.overload import database_unavailable
from app.core.settings import get_settings
from app.fleet import api as fleet_api
from app.main import create_app
from app.submissions import api as submissions_api
from app.submissions.models import Submission
from app.users.models import ApiToken
from app.users.token_use import token_uses
from app.web import deps
from tests.app.conftest import GOOD_KERNEL, World
from tests.app.scaled import settings_from

pytestmark = pytest.mark.anyio


def submit_url(world: World) -> str:
    return f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/submissions"


async def upload(client: httpx.AsyncClient, world: World) -> httpx.Response:
    return await client.post(
        submit_url(world),
        headers=world.student.auth,
        files={"file": ("scale.cu", GOOD_KERNEL.encode(), "text/plain")},
    )


@pytest.fixture
def app_with(request: pytest.FixtureRequest) -> Iterator[Any]:
    """create_app() under the settings given as the fixture's (indirect) parameter."""
    with settings_from(**{k: str(v) for k, v in request.param.items()}):
        yield create_app()


@pytest.fixture
async def bounded_client(app_with: Any) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app_with)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c


class Gate:
    """Holds a request inside its thread until opened, to fill the server on purpose."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.open = threading.Event()

    def wrap(self, real: Any) -> Any:
        def held(*args: Any, **kwargs: Any) -> Any:
            self.entered.set()
            self.open.wait(timeout=20)
            return real(*args, **kwargs)

        return held

    async def wait_entered(self) -> None:
        for _ in range(500):
            if self.entered.is_set():
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the held request never reached its thread")


async def test_the_token_check_and_the_work_run_in_one_request_thread(
    client: httpx.AsyncClient, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = (await upload(client, world)).json()["id"]
    threads: dict[str, int] = {}
    real_holder, real_visible = deps.holder_of_token, submissions_api.visible_submission

    def holder(*args: Any, **kwargs: Any) -> Any:
        threads["token check"] = threading.get_ident()
        return real_holder(*args, **kwargs)

    def visible(*args: Any, **kwargs: Any) -> Any:
        threads["work"] = threading.get_ident()
        return real_visible(*args, **kwargs)

    monkeypatch.setattr(deps, "holder_of_token", holder)
    monkeypatch.setattr(submissions_api, "visible_submission", visible)
    r = await client.get(f"/api/v1/submissions/{sid}", headers=world.student.auth)
    assert r.status_code == 200, r.text
    # One hop: the session, the token check and the work share a thread, off the event loop.
    assert threads["token check"] == threads["work"] != threading.get_ident()


async def test_a_request_writes_no_token_use_and_the_recorder_notes_it_once_a_minute(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    token_uses.flush()
    token_id = session.scalars(
        select(ApiToken.id).where(ApiToken.user_id == world.student.user.id)
    ).one()
    r = await client.get(f"/api/v1/courses/{world.course.slug}/labs", headers=world.student.auth)
    assert r.status_code == 200
    session.expire_all()
    # Not written by the request itself...
    assert session.get_one(ApiToken, token_id).last_used_at is None
    # ...but by the recorder, in a transaction of its own.
    assert token_uses.flush() >= 1
    session.expire_all()
    first = session.get_one(ApiToken, token_id).last_used_at
    assert first is not None
    for _ in range(3):
        await client.get(f"/api/v1/courses/{world.course.slug}/labs", headers=world.student.auth)
    assert token_uses.flush() == 0  # within the minute: nothing more to write
    session.expire_all()
    assert session.get_one(ApiToken, token_id).last_used_at == first


@pytest.mark.parametrize(
    "app_with", [{"max_requests_in_flight": 1, "retry_after_seconds": 7}], indirect=True
)
async def test_past_the_bound_a_request_is_refused_with_a_sentence_and_health_answers(
    bounded_client: httpx.AsyncClient, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate()
    monkeypatch.setattr(submissions_api, "labs_of", gate.wrap(submissions_api.labs_of))
    labs = f"/api/v1/courses/{world.course.slug}/labs"
    held = asyncio.ensure_future(bounded_client.get(labs, headers=world.student.auth))
    await gate.wait_entered()
    try:
        refused = await bounded_client.get(labs, headers=world.student.auth)
        page = await bounded_client.get(f"/courses/{world.course.slug}")
        health = await bounded_client.get("/api/v1/health")
    finally:
        gate.open.set()
    assert (await held).status_code == 200
    assert refused.status_code == 503
    assert refused.headers["Retry-After"] == "7"
    assert refused.json()["detail"].startswith("The server is busy")
    assert "again in 7 seconds" in refused.json()["detail"]
    # Pages get the error page, not JSON.
    assert page.status_code == 503 and "text/html" in page.headers["content-type"]
    assert "The server is busy" in page.text
    # The health check is outside the bound.
    assert health.status_code == 200 and health.json()["status"] == "ok"
    # Once the held request is done, the next one is taken.
    after = await bounded_client.get(labs, headers=world.student.auth)
    assert after.status_code == 200


@pytest.mark.parametrize("app_with", [{"web_threads": 1}], indirect=True)
async def test_health_answers_while_every_request_thread_is_busy(
    bounded_client: httpx.AsyncClient, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.core.database import get_probe_engine
    from app.jobs import workers

    name = f"health-test-host:{threading.get_ident()}"
    workers.register_worker(
        name=name,
        host="health-test-host",
        pid=1,
        gpu="0",
        gpu_model="NVIDIA H100 80GB HBM3",
        arch="sm_90",
        can_compile=True,
        can_run=True,
        note="",
        queues=["grading"],
        version="test",
    )
    report: dict[str, Any] = {}
    real_recent = fleet_api.recent_workers

    def recent(session: Session, **kwargs: Any) -> Any:
        # Deploy's worker report: read in the health check's own thread and connection.
        report["thread"], report["bind"] = threading.get_ident(), session.get_bind()
        return real_recent(session, **kwargs)

    monkeypatch.setattr(fleet_api, "recent_workers", recent)
    gate = Gate()
    monkeypatch.setattr(submissions_api, "labs_of", gate.wrap(submissions_api.labs_of))
    labs = f"/api/v1/courses/{world.course.slug}/labs"
    held = [
        asyncio.ensure_future(bounded_client.get(labs, headers=world.student.auth))
        for _ in range(3)
    ]
    await gate.wait_entered()
    try:
        health = await asyncio.wait_for(bounded_client.get("/api/v1/health"), timeout=10)
        waiting = [not task.done() for task in held]
    finally:
        gate.open.set()
        workers.mark_stopped(name)
    assert health.status_code == 200
    assert all(waiting), "the requests were meant to be held while health was asked"
    assert [(await task).status_code for task in held] == [200, 200, 200]
    # The worker report came with it, read beside the probe, off the event loop.
    assert "NVIDIA H100 80GB HBM3" in [w["gpu_model"] for w in health.json()["workers"]]
    assert report["thread"] != threading.get_ident()
    assert report["bind"] is get_probe_engine()


def _sqlite_path() -> str | None:
    url = get_settings().database_url
    return url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else None


async def test_sqlite_locked_past_the_wait_is_a_503_and_the_upload_is_not_stored(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    path = _sqlite_path()
    if path is None:
        pytest.skip("locks the SQLite file; the database here is not SQLite")

    def mine() -> int:
        session.expire_all()
        return (
            session.scalar(
                select(func.count(Submission.id)).where(Submission.user_id == world.student.user.id)
            )
            or 0
        )

    before = mine()
    session.rollback()  # hold no read snapshot of our own while another holds the lock
    locker = sqlite3.connect(path, timeout=1, isolation_level=None)
    try:
        locker.execute("BEGIN IMMEDIATE")  # another writer that does not let go
        r = await upload(client, world)
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert r.status_code == 503, r.text
    assert r.headers["Retry-After"] == str(get_settings().retry_after_seconds)
    assert r.json()["detail"].startswith("The database did not answer in time")
    assert "stored and changed nothing" in r.json()["detail"]
    assert mine() == before
    # Once the lock is gone, the same upload goes through.
    assert (await upload(client, world)).status_code == 202
    assert mine() == before + 1


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_postgresql_that_does_not_answer_is_a_503_with_a_sentence(
    world: World,
) -> None:
    # A real driver talking to a port where no server listens, as while PostgreSQL restarts.
    url = f"postgresql+psycopg://kg:kg@127.0.0.1:{_closed_port()}/kg"
    with settings_from(database_url=url, db_pool_timeout_seconds="2"):
        transport = httpx.ASGITransport(app=create_app())
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            api = await c.get(
                f"/api/v1/courses/{world.course.slug}/labs", headers=world.student.auth
            )
            page = await c.get("/login?next=/")
            login = await c.post(
                "/login", data={"email": world.student.email, "password": "x", "csrf_token": "x"}
            )
            health = await c.get("/api/v1/health")
    assert api.status_code == 503, api.text
    assert api.json()["detail"].startswith("The database did not answer in time")
    assert api.headers["Retry-After"]
    assert page.status_code == 200  # a page that needs no database still answers
    assert login.status_code in (403, 503)  # CSRF first; never a 500
    assert health.status_code == 503 and "Retry-After" in health.headers


def test_a_query_mistake_is_not_taken_for_a_database_that_is_away(tmp_path: Any) -> None:
    connection = sqlite3.connect(tmp_path / "x.sqlite")
    try:
        connection.execute("SELECT * FROM no_such_table")
    except sqlite3.OperationalError as exc:
        mistake = OperationalError("SELECT", {}, exc)
    try:
        connection.execute("BEGIN IMMEDIATE")
        other = sqlite3.connect(tmp_path / "x.sqlite", timeout=0)
        other.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        locked = OperationalError("BEGIN", {}, exc)
    assert not database_unavailable(mistake)
    assert database_unavailable(locked)


@pytest.mark.parametrize(
    "app_with",
    [{"web_threads": 1, "max_request_wait_seconds": 0.3, "retry_after_seconds": 4}],
    indirect=True,
)
async def test_a_request_that_waits_too_long_for_a_thread_is_refused_and_stores_nothing(
    bounded_client: httpx.AsyncClient,
    world: World,
    session: Session,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = Gate()
    monkeypatch.setattr(submissions_api, "labs_of", gate.wrap(submissions_api.labs_of))
    labs = f"/api/v1/courses/{world.course.slug}/labs"
    held = asyncio.ensure_future(bounded_client.get(labs, headers=world.student.auth))
    await gate.wait_entered()
    try:
        r = await upload(bounded_client, world)
    finally:
        gate.open.set()
    assert (await held).status_code == 200
    assert r.status_code == 503 and r.headers["Retry-After"] == "4"
    assert r.json()["detail"].startswith("The server is busy")
    stored = session.scalar(
        select(func.count(Submission.id)).where(Submission.user_id == world.student.user.id)
    )
    assert stored == 0


def _broken_commit(monkeypatch: pytest.MonkeyPatch, *, landed: bool) -> None:
    """The next commit loses its connection: after the data was stored (`landed`) or before."""
    real_commit = Session.commit
    armed = [True]

    def commit(self: Session) -> None:
        mine = any(isinstance(row, Submission) for row in self.identity_map.values())
        if armed[0] and mine:  # the upload's own commit: its session holds the new row
            armed[0] = False
            if landed:
                real_commit(self)
            else:
                self.rollback()
            raise OperationalError(
                "COMMIT", {}, Exception("server closed the connection"), connection_invalidated=True
            )
        real_commit(self)

    monkeypatch.setattr(Session, "commit", commit)


@pytest.mark.parametrize("landed", [True, False])
async def test_an_upload_whose_commit_lost_its_connection_says_what_happened(
    client: httpx.AsyncClient,
    world: World,
    session: Session,
    monkeypatch: pytest.MonkeyPatch,
    landed: bool,
) -> None:
    _broken_commit(monkeypatch, landed=landed)
    r = await upload(client, world)
    monkeypatch.undo()
    stored = session.scalar(
        select(func.count(Submission.id)).where(Submission.user_id == world.student.user.id)
    )
    if landed:  # asked again over a new connection: it is stored, so it is a 202
        assert r.status_code == 202, r.text
        assert stored == 1
    else:
        assert r.status_code == 503
        assert "stored and changed nothing" in r.json()["detail"]
        assert stored == 0


async def test_health_answers_503_rather_than_wait_for_a_probe_that_hangs(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    finished = threading.Event()

    def hanging_probe(read: Any) -> Any:
        # As a connect to a PostgreSQL that is still starting up.
        threading.Event().wait(timeout=3)
        finished.set()
        return []

    monkeypatch.setattr(fleet_api, "probe", hanging_probe)
    r = await client.get("/api/v1/health")
    answered_before_the_probe_ended = not finished.is_set()
    assert r.status_code == 503 and "Retry-After" in r.headers
    assert r.json()["detail"].startswith("The database did not answer in time")
    assert answered_before_the_probe_ended
