"""The SQLAlchemy engine, sessions and the declarative base with a naming convention."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import DateTime, Engine, MetaData, create_engine, event, text
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.types import TypeDecorator

from app.core.settings import get_settings

if TYPE_CHECKING:
    from alembic.config import Config

T = TypeVar("T")

log = logging.getLogger(__name__)


def _migrations_dir() -> Path:
    """The top-level migrations/ folder, installed as app.migrations (see setup.py): found
    through the import system, so an installed wheel migrates from any directory, as an
    editable checkout does; a checkout run without installing (PYTHONPATH, as on a bare GPU
    host) has no such package, and uses the folder beside app/."""
    try:
        found = Path(str(resources.files("app.migrations")))
    except ModuleNotFoundError:
        found = None
    if found is not None and (found / "env.py").is_file():
        return found
    return Path(__file__).resolve().parents[2] / "migrations"


MIGRATIONS_DIR = _migrations_dir()

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """Stores aware UTC datetimes; SQLite drops the zone, so it is put back on the way out."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are ambiguous; pass an aware UTC datetime")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime()}


def utcnow() -> datetime:
    return datetime.now(UTC)


def _sqlite_pragmas(busy_ms: int) -> Callable[[Any, Any], None]:
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        # WAL lets readers go on while one writes; busy_timeout waits a little for another
        # writer instead of failing at once (past it the request is a 503, not a wedge);
        # SQLite leaves foreign keys off unless asked.
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        cursor.close()

    return on_connect


def _create(url: str, **pool: Any) -> Engine:
    if url.startswith("sqlite"):
        busy = get_settings().sqlite_busy_timeout_seconds
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": busy}, **pool
        )
        event.listen(engine, "connect", _sqlite_pragmas(int(busy * 1000)))
        return engine
    # pre_ping replaces connections a database restart broke, instead of failing a request.
    return create_engine(url, pool_pre_ping=True, **pool)


@functools.cache
def engine_for(url: str) -> Engine:
    settings = get_settings()
    return _create(
        url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
        pool_timeout=settings.db_pool_timeout_seconds,
    )


@functools.cache
def probe_engine_for(url: str) -> Engine:
    """A one-connection pool of its own for the health check, so it never waits behind requests."""
    if url.startswith("sqlite"):
        return _create(url, pool_size=1, max_overflow=0, pool_timeout=1)
    return _create(
        url, pool_size=1, max_overflow=0, pool_timeout=1, connect_args={"connect_timeout": 2}
    )


def get_engine() -> Engine:
    settings = get_settings()
    if settings.database_url.startswith("sqlite"):
        settings.ensure_data_dir()
    return engine_for(settings.database_url)


def get_probe_engine() -> Engine:
    settings = get_settings()
    if settings.database_url.startswith("sqlite"):
        settings.ensure_data_dir()
    return probe_engine_for(settings.database_url)


def ping() -> None:
    """Ask the database to answer, over the health check's own connection."""
    with get_probe_engine().connect() as connection:
        connection.execute(text("SELECT 1"))


def probe(read: Callable[[Session], T]) -> T:
    """Ask the database to answer, then `read`, over the health check's own connection; a
    read only (rolled back), so it never waits for another writer."""
    with Session(get_probe_engine()) as session:
        session.execute(text("SELECT 1"))
        try:
            return read(session)
        finally:
            session.rollback()


@functools.cache
def _session_factory(url: str) -> sessionmaker[Session]:
    return sessionmaker(bind=engine_for(url), expire_on_commit=False)


def new_session() -> Session:
    get_engine()
    return _session_factory(get_settings().database_url)()


# Actions a unit of work runs once it commits (session.info's list; see after_commit).
AFTER_COMMIT = "kernelgrader.after_commit"


def after_commit(session: Session, action: Callable[[], None]) -> None:
    """Run `action` once the session's transaction commits, never if it rolls back.

    What a unit of work tells the world outside the database (a job for the broker) goes out
    only when its rows are there for a worker to find. A savepoint's commit is not the commit;
    an action added inside a savepoint that rolls back still runs at the commit.
    """
    if not session.in_transaction():
        session.begin()  # so that a rollback before any statement drops the action too
    session.info.setdefault(AFTER_COMMIT, []).append(action)


def pending_after_commit(session: Session) -> list[Callable[[], None]]:
    """The actions waiting for the session's commit (app.core.overload keeps them across a
    commit whose outcome it has to confirm)."""
    return list(session.info.get(AFTER_COMMIT, []))


def run_after_commit(actions: Iterable[Callable[[], None]]) -> None:
    for action in actions:
        try:
            action()
        except Exception:
            # The rows are committed; what the action would have told (a job's send) is
            # recovered from them (the workers' sweep), so it must not fail the request.
            log.exception("an action after a commit failed")


@event.listens_for(Session, "after_commit")
def _committed(session: Session) -> None:
    if session.in_nested_transaction():
        return
    run_after_commit(session.info.pop(AFTER_COMMIT, []))


@event.listens_for(Session, "after_soft_rollback")
def _rolled_back(session: Session, previous: Any) -> None:
    if previous.parent is None:
        session.info.pop(AFTER_COMMIT, None)


@contextmanager
def session_scope() -> Iterator[Session]:
    """One unit of work: commit when the block ends, roll back if it raises."""
    session = new_session()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def alembic_config() -> Config:
    """Alembic's settings for the migrations shipped in the package; no alembic.ini needed."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def as_dict(rows: Iterable[Any]) -> dict[Any, Any]:
    """Two-column result rows as a dict: key, value (a Result itself is not a mapping)."""
    return {key: value for key, value in rows}
