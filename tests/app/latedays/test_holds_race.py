"""Late days held at upload, at once (issue 31, classes 9 and 17), against a real server on
SQLite and PostgreSQL: see test_holds.py for the rule."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import LatePolicy
from app.courses.service import add_lab
from app.submissions.models import Submission
from tests.app.conftest import make_world
from tests.app.latedays.helpers import record_graded
from tests.app.latedays.test_holds import _mine, _upload
from tests.app.races import at_once, codes, live, race_database  # noqa: F401

pytestmark = pytest.mark.anyio


async def test_thirty_late_uploads_at_once_hold_the_last_day_once(
    live: str,  # noqa: F811
    session: Session,
) -> None:
    due = utcnow() - timedelta(hours=2)
    world = make_world(session, late_policy=LatePolicy.refuse, due_at=due)
    world.course.late_days = 1
    labs = [world.lab] + [
        add_lab(session, course=world.course, ref=ref, due_at=due, late_policy=LatePolicy.refuse)
        for ref in ("vector-scale", "hadamard")
    ]
    session.commit()
    uploads = [_upload(world, labs[n % 3], world.student.auth) for n in range(30)]
    answers = await at_once(live, uploads)
    assert set(codes(answers)) <= {202, 403}, [r.text for r in answers if r.status_code >= 500]
    taken = {uploads[i][1] for i, r in enumerate(answers) if r.status_code == 202}
    # The day is held by the first upload taken; more uploads to that lab need no more days
    # (a lab is charged once); the other labs refuse at once, with a sentence.
    assert len(taken) == 1, taken
    refused = [r.json()["detail"] for r in answers if r.status_code == 403]
    assert len(refused) == 20
    assert all("does not accept late submissions" in d for d in refused)
    assert all("1 more is held by your late uploads to other labs" in d for d in refused)
    accepted = [r.json()["id"] for r in answers if r.status_code == 202]
    # Nothing accepted is lost.
    session.expire_all()
    assert session.scalar(
        select(func.count())
        .select_from(Submission)
        .where(Submission.user_id == world.student.user.id)
    ) == len(accepted)

    async with httpx.AsyncClient(base_url=live) as client:
        held = await _mine(client, world, world.student.auth)
        assert (held["spent"], held["held"], held["left"]) == (0, 1, 0)
        # Workers record their verdicts at once: the day is spent once, on the lab that held it.
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda sid: record_graded(sid, score=7), accepted))
        after = await _mine(client, world, world.student.auth)
        assert (after["spent"], after["held"], after["left"]) == (1, 0, 0)
        (use,) = after["labs"]
        assert (use["days_late"], use["days_spent"]) == (1, 1)
        assert [e["kind"] for e in after["history"]].count("spend") == 1
        book = await client.get(
            f"/api/v1/courses/{world.course.slug}/gradebook.csv", headers=world.instructor.auth
        )
        header, *rows = [line.split(",") for line in book.text.splitlines()]
        row = next(r for r in rows if r[2] == world.student.email)
        lab = next(lab for lab in labs if lab.slug in next(iter(taken)))
        # Covered by the day it held: counted, and not late.
        assert row[header.index(f"{lab.slug}_late")] == "0"
        assert row[header.index(f"{lab.slug}_late_days")] == "1"
