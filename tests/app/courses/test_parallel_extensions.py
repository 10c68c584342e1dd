"""Extensions granted and taken back at once (issue 31, class 17): 32 grants for one student
against a real server all succeed, the last one's date standing (on main, eight answered 500 on
SQLite and five on PostgreSQL: the second insert of the student's row was not caught), and 8
revocations at once take it back once; on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import Extension
from tests.app.conftest import make_world
from tests.app.races import at_once, codes, live, race_database  # noqa: F401

pytestmark = pytest.mark.anyio


async def test_grants_at_once_all_succeed_and_leave_one_extension(
    live: str,  # noqa: F811
    session: Session,
) -> None:
    world = make_world(session, due_at=utcnow() - timedelta(hours=1))
    due = world.lab.due_at
    assert due is not None
    url = (
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/extensions/"
        f"{world.student.email}"
    )
    untils = [(due + timedelta(days=1, minutes=n)).isoformat() for n in range(32)]
    answers = await at_once(
        live,
        [
            ("PUT", url, {"headers": staff.auth, "json": {"until": until, "note": f"grant {n}"}})
            for n, (until, staff) in enumerate(
                zip(untils, [world.ta, world.instructor] * 16, strict=True)
            )
        ],
    )
    assert codes(answers) == {200: 32}, [r.text for r in answers if r.status_code != 200]
    session.expire_all()
    (row,) = session.scalars(
        select(Extension).where(
            Extension.lab_id == world.lab.id, Extension.user_id == world.student.user.id
        )
    ).all()
    # Whichever came last stands, whole: its date with its own note.
    n = int(row.note.removeprefix("grant "))
    assert row.due_at.isoformat() == untils[n]
    taken = await at_once(live, [("DELETE", url, {"headers": world.ta.auth})] * 8)
    assert codes(taken) == {204: 1, 404: 7}
    session.expire_all()
    assert session.scalars(select(Extension).where(Extension.lab_id == world.lab.id)).all() == []
