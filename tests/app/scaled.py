"""Fixtures for the larger setup's tests: real PostgreSQL and Redis servers, named by URL.

`scripts/ci-services.sh` starts both on loopback and prints the two URLs; `.ci/run` exports
them. Without them the tests skip and say how to run them, except under CI, where a skip
would hide that the larger setup was never tested, so they fail instead.

The service's own fixtures (`session`, `world`, `client` in conftest.py) read the settings
whenever they build something, so switching the settings here points them at PostgreSQL.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from celery import Celery
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

import app.jobs.celery_app as celery_module
from app.cli.database import upgrade_database
from app.core.database import engine_for
from app.core.settings import get_settings
from app.jobs.celery_app import GPU_QUEUE, QUEUE, make_celery
from app.jobs.sender import job_sender

POSTGRES_VAR = "KERNELGRADER_TEST_POSTGRES_URL"
REDIS_VAR = "KERNELGRADER_TEST_REDIS_URL"
HOW_TO_RUN = (
    "run scripts/ci-services.sh as root (it installs and starts PostgreSQL and Redis on "
    "loopback and prints both URLs), export the two lines it prints, then run "
    "./scripts/test.sh tests/app/test_scaled_setup.py"
)


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def required_url(name: str) -> str:
    """The server URL in `name`; skip (fail under CI) with how to set it when it is unset."""
    url = os.environ.get(name, "").strip()
    if url:
        return url
    message = f"{name} not set: {HOW_TO_RUN}"
    if _in_ci():
        pytest.fail(f"{message}. CI must run the larger setup's tests, not skip them.")
    pytest.skip(message)


def _drop(admin: Engine, name: str, tries: int = 10) -> None:
    """DROP DATABASE WITH (FORCE), which ends a connection a failed test or a killed worker left
    behind. A role without pg_signal_backend cannot end an autovacuum worker visiting the
    database (scripts/ci-services.sh grants it): such a drop is tried again, 0.5 s apart."""
    for attempt in range(tries):
        try:
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            return
        except DBAPIError:
            if attempt == tries - 1:
                raise
            time.sleep(0.5)


@contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new, empty PostgreSQL database on the server of `server_url`, dropped afterwards."""
    name = f"kgtest_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
        try:
            yield url
        finally:
            engine_for(url).dispose()
            _drop(admin, name)
    finally:
        admin.dispose()


@contextmanager
def settings_from(**variables: str) -> Iterator[None]:
    """Run the block with these KERNELGRADER_ settings, then put the earlier ones back."""
    with pytest.MonkeyPatch.context() as patch:
        for key, value in variables.items():
            patch.setenv(f"KERNELGRADER_{key.upper()}", value)
        get_settings.cache_clear()
        yield
    # After the environment is restored, so the next read sees the earlier settings.
    get_settings.cache_clear()


# The databases a test of two requests at once runs on: what SQLite's one writer at a time and
# PostgreSQL's row locks each make of a race differ, so such a test runs on both.
BACKENDS = ("sqlite", "postgresql")


@contextmanager
def migrated_database(backend: str, folder: Path) -> Iterator[str]:
    """A fresh, migrated database that the service's settings name during the block: a SQLite
    file in `folder` (its writers wait up to 30 s for each other, not the tests' 2 s, so a slow
    shared machine does not turn a wait into a failure), or a new database on the PostgreSQL
    server of KERNELGRADER_TEST_POSTGRES_URL (skipped without it, failed under CI)."""
    if backend == "sqlite":
        url = f"sqlite:///{folder / 'race.sqlite'}"
        with settings_from(database_url=url, sqlite_busy_timeout_seconds="30"):
            upgrade_database()
            yield url
        return
    with fresh_database(required_url(POSTGRES_VAR)) as url, settings_from(database_url=url):
        upgrade_database()
        yield url


@contextmanager
def sending_through(broker_url: str) -> Iterator[Celery]:
    """The service sends its jobs through a Celery app on `broker_url` during the block.

    The module's `celery_app` is built once per process, from the settings of the moment;
    `app.jobs.send.publish` looks it up on each send, so replacing it here reroutes the real
    send path.
    """
    # Jobs handed to the sender (app.jobs.sender) before the switch go where they were meant
    # to, and so do the block's own before it ends.
    job_sender.wait_sent(60)
    with settings_from(broker_url=broker_url), pytest.MonkeyPatch.context() as patch:
        celery = make_celery()
        patch.setattr(celery_module, "celery_app", celery)
        try:
            yield celery
        finally:
            job_sender.wait_sent(60)
            celery.close()


def purge_grading_queues(celery: Celery) -> None:
    """Empty the grading queues, so messages of an earlier run cannot reach this run's worker."""
    with celery.connection_for_write() as connection:
        channel = connection.default_channel
        for queue in (QUEUE, GPU_QUEUE):
            channel.queue_declare(queue=queue, durable=True, auto_delete=False)
            channel.queue_purge(queue)


def redis_server() -> str:
    """The redis-server program; skip (fail under CI) with how to install it when missing."""
    exe = shutil.which("redis-server")
    if exe:
        return exe
    message = f"redis-server is not installed: {HOW_TO_RUN}"
    if _in_ci():
        pytest.fail(f"{message}. CI must run the broker restart tests, not skip them.")
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OwnRedis:
    """A redis-server of the test's own on a loopback port, without persistence, so that a
    restart loses every queued message (the CI Redis keeps them, and other tests use it)."""

    def __init__(self, exe: str, folder: Path, port: int | None = None) -> None:
        self.exe, self.folder, self.port = exe, folder, port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                self.exe,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
            ],  # fmt: skip
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(200):  # up to 10 s
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def kill(self) -> None:
        """SIGKILL, as a crash: no save at shutdown, so every queued message is gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None


class SilentPort:
    """A loopback port that takes connections and never answers, as a broker behind a dead
    network path; closing it resets the connections it held."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)  # connections wait in the backlog, never accepted

    def close(self) -> None:
        with suppress(OSError):
            self.sock.close()
