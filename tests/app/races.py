"""Parallel requests against a real server, on SQLite and on PostgreSQL (issue 31's races).

`race_database` (module scope, two params) points the settings at a database of the module's
own: a fresh SQLite file with the service's default busy timeout, or a fresh database on the
PostgreSQL server of KERNELGRADER_TEST_POSTGRES_URL (skipped with the hint where it is unset,
failing under CI, as tests/app/scaled.py says). `live` serves the app with uvicorn in a thread
of this process on loopback, over that database: the requests of a race really run at once,
each in its own request thread, with their own connections. Import both fixtures into a test
module to use them.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.cli.database import upgrade_database
from tests.app.lti.platform import ServerThread, free_port
from tests.app.scaled import (
    POSTGRES_VAR,
    fresh_database,
    required_url,
    sending_through,
    settings_from,
)

KINDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="module", params=KINDS)
def race_database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    folder: Path = tmp_path_factory.mktemp(f"race-{request.param}")
    broker = f"sqla+sqlite:///{folder / 'broker.sqlite'}"
    if request.param == "sqlite":
        # The service's default wait for SQLite's write lock (the tests' own is shorter).
        with settings_from(
            database_url=f"sqlite:///{folder / 'race.sqlite'}", sqlite_busy_timeout_seconds="5"
        ):
            upgrade_database()
            with sending_through(broker):
                yield request.param
        return
    server = required_url(POSTGRES_VAR)
    with fresh_database(server) as url, settings_from(database_url=url):
        upgrade_database()
        with sending_through(broker):
            yield request.param


@pytest.fixture(scope="module")
def live(race_database: str) -> Iterator[str]:
    """The service on loopback, over the module's database; its base URL."""
    from app.main import create_app

    port = free_port()
    with ServerThread(create_app(), port=port):
        yield f"http://127.0.0.1:{port}"


async def at_once(base: str, requests: list[tuple[str, str, dict]]) -> list[httpx.Response]:
    """Send (method, path, httpx keyword arguments) all at once, each on its own connection."""

    async def one(method: str, path: str, kwargs: dict) -> httpx.Response:
        async with httpx.AsyncClient(base_url=base, timeout=120) as client:
            return await client.request(method, path, **kwargs)

    return list(await asyncio.gather(*(one(m, p, k) for m, p, k in requests)))


def codes(answers: list[httpx.Response]) -> Counter[int]:
    return Counter(r.status_code for r in answers)
