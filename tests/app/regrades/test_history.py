"""What a regrade request's history and lists say, and what an adjustment moves (written against
the survivors of scripts/mutation.py, app/regrades): who withdrew a request and the answer's
words in its history, a student's list of one lab's requests newest first, the lab page's count
of open requests only, a request that is not there or not theirs named, a decision the CLI does
not know refused, and an adjustment that changes which submission counts settles the late days
it spends."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.errors import Closed
from app.courses.release import regrade_requests_close_at
from app.courses.service import add_lab
from app.regrades.service import ask
from app.submissions.models import CaseResult
from tests.app.conftest import make_world
from tests.app.factories import make_submission
from tests.app.latedays.helpers import graded
from tests.app.latedays.test_holds import _mine
from tests.app.regrades.test_answers import _answer, _ask
from tests.app.test_cli_course import fails
from tests.app.web.test_routes import login

pytestmark = pytest.mark.anyio


async def test_the_history_says_who_withdrew_and_what_the_answer_said(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    sub, _ = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    session.commit()
    first = await _ask(client, world.student, sub.id, "Case one?")
    # Not theirs to withdraw, and not there at all: each named in words.
    r = await client.post(
        f"/api/v1/regrade-requests/{first}/withdraw", headers=world.other_student.auth
    )
    assert r.status_code == 404
    assert r.json()["detail"] == f"There is no regrade request {first} of yours."
    r = await _answer(client, world.ta, 987654, decision="decline")
    assert r.status_code == 404 and r.json()["detail"] == "There is no regrade request 987654."
    r = await client.post(f"/api/v1/regrade-requests/{first}/withdraw", headers=world.student.auth)
    assert [(h["action"], h["by"], h["text"]) for h in r.json()["history"]] == [
        ("asked", world.student.email, "Case one?"),
        ("withdrawn", world.student.email, ""),
    ]
    # Another student does not learn that it is there.
    r = await client.get(f"/api/v1/regrade-requests/{first}", headers=world.other_student.auth)
    assert r.status_code == 404
    assert r.json()["detail"] == f"There is no regrade request {first} that you may see."
    second = await _ask(client, world.student, sub.id, "Case two?")
    r = await _answer(client, world.ta, second, decision="decline", answer="  It stands. ")
    assert [(h["action"], h["by"], h["text"]) for h in r.json()["history"]] == [
        ("asked", world.student.email, "Case two?"),
        ("declined", world.ta.email, "It stands."),
    ]


async def test_a_students_list_holds_their_requests_of_this_lab_newest_first(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    other_lab = add_lab(session, course=world.course, ref="vector-scale")
    here, _ = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    there, _ = make_submission(session, user=world.student.user, lab=other_lab, score=6)
    session.commit()
    older = await _ask(client, world.student, here.id, "First.")
    await client.post(f"/api/v1/regrade-requests/{older}/withdraw", headers=world.student.auth)
    newer = await _ask(client, world.student, here.id, "Second.")
    elsewhere = await _ask(client, world.student, there.id, "Other lab.")
    base = f"/api/v1/courses/{world.course.slug}/labs"
    r = await client.get(f"{base}/{world.lab.slug}/regrade-requests", headers=world.student.auth)
    assert [q["id"] for q in r.json()] == [newer, older]
    r = await client.get(f"{base}/{other_lab.slug}/regrade-requests", headers=world.student.auth)
    assert [q["id"] for q in r.json()] == [elsewhere]


async def test_the_lab_page_counts_the_open_requests_only(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    sub, _ = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    session.commit()
    for text in ("One.", "Two."):
        closed = await _ask(client, world.student, sub.id, text)
        await _answer(client, world.ta, closed, decision="decline")
    await _ask(client, world.student, sub.id, "Three.")
    await login(client, world.ta)
    page = await client.get(f"/courses/{world.course.slug}/labs/{world.lab.slug}")
    assert "regrade requests (1 open)" in page.text


async def test_the_cli_names_the_decisions_and_a_request_that_is_not_there(
    session: Session,
) -> None:
    world = make_world(session)
    session.commit()
    course, ta = world.course.slug, world.ta.email
    out = fails("regrade-request", "answer", course, "987654", "maybe", "--answer", "Hm.",
                "--staff", ta)  # fmt: skip
    assert out.splitlines() == ["Choose regrade, adjust or decline."]
    out = fails("regrade-request", "answer", course, "987654", "decline", "--answer", "No.",
                "--staff", ta)  # fmt: skip
    assert out.splitlines() == ["There is no regrade request 987654."]


async def test_an_adjustment_that_changes_what_counts_gives_back_the_late_day(
    client: httpx.AsyncClient, session: Session
) -> None:
    due = utcnow() - timedelta(days=2)
    world = make_world(session, due_at=due)
    world.course.late_days = 2
    on_time = graded(
        session, user=world.student.user, lab=world.lab, at=due - timedelta(hours=1), score=5
    )
    graded(session, user=world.student.user, lab=world.lab, at=due + timedelta(hours=3), score=6)
    session.commit()
    # The late one scores best and counts: it spends a day.
    before = await _mine(client, world, world.student.auth)
    assert (before["spent"], before["left"]) == (1, 1)
    request_id = await _ask(client, world.student, on_time.id, "Case two was right.")
    r = await _answer(client, world.ta, request_id, decision="adjust", points=2)
    assert r.status_code == 200, r.text
    # The on-time one, now 7, counts instead: the day comes back.
    after = await _mine(client, world, world.student.auth)
    assert (after["spent"], after["left"]) == (0, 2)


async def test_what_an_asker_reads_when_a_request_cannot_be_made(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    world.lab.team_size = 2
    world.pair_up(session, now=utcnow() - timedelta(hours=1))
    sub, job = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    from app.submissions.credits import credit_submission

    credit_submission(session, submission=sub, lab=world.lab)
    # Another student's submission has a case this one lacks.
    _, theirs = make_submission(session, user=world.ta.user, lab=world.lab, score=6)
    session.add(
        CaseResult(job_id=theirs.id, name="n-7", sizes={"n": 7}, hidden=False, verdict="fail")
    )
    session.commit()
    url = f"/api/v1/submissions/{sub.id}/regrade-requests"
    r = await client.post(url, headers=world.student.auth, json={"text": "Why?", "case": "n-7"})
    assert r.status_code == 422 and "has no test case 'n-7'" in r.json()["detail"]
    r = await client.post(url, headers=world.ta.auth, json={"text": "Why?"})
    assert r.status_code == 403 and r.json()["detail"] == (
        "Staff regrade a submission directly (its page's Regrade button); requests are for "
        "students."
    )
    first = await _ask(client, world.student, sub.id, "Why?")
    r = await client.post(url, headers=world.other_student.auth, json={"text": "Me too."})
    assert r.status_code == 409 and r.json()["detail"] == (
        f"Your teammate {world.student.email} already has an open request (#{first}) about "
        f"submission {sub.id}, which counts for you both; a submission has one open request at "
        "a time, so wait for its answer (or ask them to add what you want to say)."
    )


def test_requests_close_at_the_windows_end_itself(session: Session) -> None:
    released = utcnow() - timedelta(days=3)
    world = make_world(session, due_at=released)
    world.course.regrade_window_days = 3
    sub, _ = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    session.commit()
    closes = regrade_requests_close_at(world.course, world.lab)
    assert closes is not None
    user = world.student.user
    with pytest.raises(Closed) as refused:
        ask(session, user=user, submission_id=sub.id, text="Late?", now=closes)
    assert refused.value.message == (
        f"Regrade requests for {world.lab.slug} closed at {closes:%Y-%m-%d %H:%M} UTC, 3 days "
        "after its grades were released; ask the course staff directly if something is wrong."
    )
    made = ask(
        session, user=user, submission_id=sub.id, text="Just in time?",
        now=closes - timedelta(microseconds=1),
    )  # fmt: skip
    assert made.text == "Just in time?"
