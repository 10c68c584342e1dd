"""One open regrade request per submission is the database's rule (issue 31, class 12): a
second open one is refused by the partial unique index, closed ones do not count, and the
migration closes the duplicates that main let in before the constraint."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy import Connection, create_engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.database import alembic_config
from app.regrades.models import RegradeRequest
from tests.app.conftest import make_world
from tests.app.factories import make_submission
from tests.app.scaled import settings_from


def test_the_database_refuses_a_second_open_request(session: Session) -> None:
    world = make_world(session)
    sub, _ = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    for _ in range(2):
        session.add(
            RegradeRequest(
                lab_id=world.lab.id, submission_id=sub.id, user_id=world.student.user.id, text="x"
            )
        )
    with pytest.raises(IntegrityError):
        session.flush()
    session.rollback()
    # Closed ones do not count: any number of them beside one open request.
    world = make_world(session)
    sub, _ = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    for state in ("declined", "withdrawn", "accepted", "open"):
        session.add(
            RegradeRequest(
                lab_id=world.lab.id,
                submission_id=sub.id,
                user_id=world.student.user.id,
                text="x",
                state=state,
            )
        )
    session.flush()
    session.rollback()


def _insert(connection: Connection, table: str, **values: object) -> None:
    """A row of a table as the schema of the moment has it, its other required columns filled
    with plain values of their type."""
    columns = sa.Table(table, sa.MetaData(), autoload_with=connection).columns
    for column in columns:
        if column.name in values or column.nullable or column.server_default is not None:
            continue
        if column.primary_key:
            continue
        python = column.type.python_type if not isinstance(column.type, sa.JSON) else dict
        values[column.name] = {
            int: 0,
            float: 0.0,
            bool: False,
            str: "",
            dict: "{}",
            list: "[]",
        }.get(python, datetime(2030, 1, 1, tzinfo=UTC))
    connection.execute(sa.insert(columns[0].table).values(**values))


def test_the_migration_closes_duplicates_main_let_in(tmp_path: Path) -> None:
    """A database at 0010 (main's schema) with two open requests about one submission upgrades
    with the older one open and the newer declined, saying why."""
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    with settings_from(database_url=url):
        config = alembic_config()
        command.upgrade(config, "0010")
        engine = create_engine(url)
        with engine.begin() as c:
            _insert(c, "users", id=1, email="a@x.edu")
            _insert(c, "courses", id=1, slug="c")
            _insert(c, "labs", id=1, course_id=1, slug="l")
            _insert(c, "submissions", id=1, user_id=1, lab_id=1, status="graded")
            for request_id in (1, 2, 3):
                _insert(
                    c,
                    "regrade_requests",
                    id=request_id,
                    lab_id=1,
                    submission_id=1,
                    user_id=1,
                    state="withdrawn" if request_id == 1 else "open",
                )
        command.upgrade(config, "head")
        with engine.begin() as c:
            rows = c.execute(
                sa.text("SELECT id, state, answer FROM regrade_requests ORDER BY id")
            ).all()
            events = c.execute(sa.text("SELECT request_id, action FROM regrade_events")).all()
        engine.dispose()
    assert [(r[0], r[1]) for r in rows] == [(1, "withdrawn"), (2, "open"), (3, "declined")]
    assert "duplicate of request #2" in rows[2][2]
    assert events == [(3, "declined")]
