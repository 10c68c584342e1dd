"""Late days held at upload (issue 31, class 9; issue 36, item 5).

On main a late upload spent nothing until it came to count, after the queue: with one day left
and three labs that refuse late work, 30 parallel late uploads had 28 accepted, later counted
with 0 days spent. Now a late upload holds the days it needs at intake, under the student's turn
(a row lock on PostgreSQL, the write lock on SQLite), and a lab that refuses late work refuses
the upload at once when they are not there to hold; the days come back when the upload cannot
count (it did not compile, a better one counts instead) and are spent when it counts.
"""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import Lab
from app.grading.tasks import grade
from app.latedays.models import LateDayReservation
from app.policy.rules import grant_extension
from app.submissions.models import GradingJob
from tests.app.conftest import GOOD_KERNEL, World, make_world
from tests.app.factories import make_submission
from tests.app.grading.test_worker import SYNTAX_ERROR
from tests.app.latedays.helpers import record_graded

pytestmark = pytest.mark.anyio


def _upload(world: World, lab: Lab, auth: dict[str, str], source: str = GOOD_KERNEL) -> tuple:
    url = f"/api/v1/courses/{world.course.slug}/labs/{lab.slug}/submissions"
    return ("POST", url, {"headers": auth, "files": {"file": ("k.cu", source.encode())}})


async def _post(client: httpx.AsyncClient, request: tuple) -> httpx.Response:
    method, path, kwargs = request
    return await client.request(method, path, **kwargs)


async def _mine(client: httpx.AsyncClient, world: World, auth: dict[str, str]) -> dict:
    r = await client.get(f"/api/v1/courses/{world.course.slug}/late-days/me", headers=auth)
    assert r.status_code == 200, r.text
    return r.json()


async def test_a_late_upload_that_does_not_compile_spends_no_late_days(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session, due_at=utcnow() - timedelta(hours=2))
    world.course.late_days = 2
    session.commit()
    # The upload form says so where late days would be spent.
    from tests.app.web.test_routes import login

    await login(client, world.student)
    page = (await client.get(f"/courses/{world.course.slug}/labs/{world.lab.slug}")).text
    # Before the upload, in numbers: how late, what it holds at once, what is left meanwhile,
    # and that a compile error spends none.
    note = " ".join(page.split('id="late-note">')[1].split("</p>")[0].split())
    assert note.startswith("Submitting now is 1 day late, so it is marked late.")
    assert "It holds 1 of your late days as soon as it is accepted: 1 of your 2 left remains" in (
        note
    )
    assert "It spends them only if it compiles and counts for you" in note
    assert "a compile error scores 0 and spends no late days" in note
    r = await _post(client, _upload(world, world.lab, world.student.auth, SYNTAX_ERROR))
    assert r.status_code == 202, r.text
    mine = await _mine(client, world, world.student.auth)
    assert (mine["spent"], mine["left"]) == (0, 1) and mine["held"] == 1
    # After it, on its page: what it holds while it is graded.
    sid = r.json()["id"]
    told = " ".join((await client.get(f"/submissions/{sid}")).text.split())
    assert (
        '<p class="note" id="late-day-note">This late submission holds 1 day of your late days '
        "while it is graded: it spends them only if it compiles and counts for you, and gives "
        "them back otherwise (1 left meanwhile)." in told
    )
    job = session.scalars(select(GradingJob.id).where(GradingJob.submission_id == sid))
    assert grade.apply(args=[sid, job.one()]).get() == "compile_error"
    mine = await _mine(client, world, world.student.auth)
    assert (mine["spent"], mine["left"]) == (0, 2) and mine["held"] == 0
    assert [e["kind"] for e in mine["history"]] == ["release", "hold"]
    assert "did not compile" in mine["history"][0]["reason"]
    # And once it did not compile: nothing spent, the held day back, each step of the ledger.
    told = " ".join((await client.get(f"/submissions/{sid}")).text.split())
    assert (
        "It did not compile: a compile error scores 0 and spends no late days; what it held "
        "came back (2 left)." in told
    )
    events = told.split('id="late-day-events">')[1].split("</ul>")[0]
    assert "held 1 for a late upload" in events and "got 1 back from" in events
    assert "(1 left)" in events and "(2 left)" in events
    # It still counts, as 0 points and late (nothing covered it).
    book = await client.get(
        f"/api/v1/courses/{world.course.slug}/gradebook.csv", headers=world.instructor.auth
    )
    row = next(line for line in book.text.splitlines() if world.student.email in line)
    assert row.split(",")[3:7] == ["0", "1", "0", "0"]


async def test_days_come_back_when_a_better_submission_counts_and_are_spent_when_one_counts(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session, due_at=utcnow() - timedelta(hours=2))
    world.course.late_days = 3
    due = world.lab.due_at
    assert due is not None
    make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        score=6,
        created_at=due - timedelta(hours=1),
    )
    session.commit()
    worse = await _post(client, _upload(world, world.lab, world.student.auth))
    assert (await _mine(client, world, world.student.auth))["left"] == 2
    record_graded(worse.json()["id"], score=4)  # the on-time 6 counts instead
    mine = await _mine(client, world, world.student.auth)
    assert (mine["spent"], mine["left"]) == (0, 3) and mine["held"] == 0
    assert "another submission counts instead" in mine["history"][0]["reason"]
    better = await _post(client, _upload(world, world.lab, world.student.auth))
    record_graded(better.json()["id"], score=9)
    mine = await _mine(client, world, world.student.auth)
    assert (mine["spent"], mine["left"]) == (1, 2) and mine["held"] == 0
    assert mine["history"][0]["kind"] == "spend" and mine["history"][0]["delta"] == 0
    held = select(LateDayReservation).where(LateDayReservation.user_id == world.student.user.id)
    assert session.scalars(held).all() == []


async def test_a_teams_late_upload_holds_each_members_own_days(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session, due_at=utcnow() - timedelta(hours=2))
    world.course.late_days = 2
    world.lab.team_size = 2
    world.pair_up(session, now=utcnow() - timedelta(days=1))
    due = world.lab.due_at
    assert due is not None
    # The other student's extension covers the upload: late for one member only.
    grant_extension(
        session,
        course=world.course,
        lab=world.lab,
        student=world.other_student.user,
        due_at=due + timedelta(days=1),
        granted_by=world.ta.user,
    )
    session.commit()
    r = await _post(client, _upload(world, world.lab, world.student.auth))
    assert r.status_code == 202, r.text
    mine = await _mine(client, world, world.student.auth)
    theirs = await _mine(client, world, world.other_student.auth)
    assert (mine["left"], theirs["left"]) == (1, 2)
    assert (mine["held"], theirs["held"]) == (1, 0)
    record_graded(r.json()["id"], score=8)
    mine = await _mine(client, world, world.student.auth)
    theirs = await _mine(client, world, world.other_student.auth)
    # As the README says: a team's late submission charges each member by their own due date.
    assert (mine["spent"], mine["left"], theirs["spent"], theirs["left"]) == (1, 1, 0, 2)
