"""Who answers and who reads a regrade request, through the API: only the course's staff answer
(never the student who asked, whatever points they name), adjustments add up, and a request is
read by its student and the course's staff only."""

from __future__ import annotations

import csv
import io

import httpx
import pytest
from sqlalchemy.orm import Session

from app.gradebook.service import gradebook_csv
from tests.app.conftest import Member, World, make_world
from tests.app.factories import make_submission

pytestmark = pytest.mark.anyio


def _score(session: Session, world: World, email: str) -> str:
    session.expire_all()
    table = csv.reader(io.StringIO(gradebook_csv(session, course=world.course)))
    return next(row for row in table if row[2] == email)[3]


async def _ask(client: httpx.AsyncClient, who: Member, submission: int, text: str) -> int:
    r = await client.post(
        f"/api/v1/submissions/{submission}/regrade-requests", headers=who.auth, json={"text": text}
    )
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


async def _answer(
    client: httpx.AsyncClient, who: Member, request_id: int, **body: object
) -> httpx.Response:
    return await client.post(
        f"/api/v1/regrade-requests/{request_id}/answer",
        headers=who.auth,
        json={"answer": "Looked again.", **body},
    )


async def test_a_student_never_answers_a_request_not_even_their_own(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    sub, _ = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    session.commit()
    request_id = await _ask(client, world.student, sub.id, "Case two is wrong.")
    for who in (world.student, world.other_student, world.outsider):
        for body in (
            {"decision": "adjust", "points": 4},
            {"decision": "regrade"},
            {"decision": "decline"},
        ):
            r = await _answer(client, who, request_id, **body)
            assert r.status_code in (403, 404), (who.email, body, r.text)
    mine = await client.get(f"/api/v1/regrade-requests/{request_id}", headers=world.student.auth)
    assert mine.json()["state"] == "open" and mine.json()["points"] is None
    assert [h["action"] for h in mine.json()["history"]] == ["asked"]
    assert _score(session, world, world.student.email) == "6"
    # The staff still can.
    r = await _answer(client, world.ta, request_id, decision="adjust", points=1)
    assert r.status_code == 200, r.text
    assert _score(session, world, world.student.email) == "7"


async def test_adjustments_add_up_and_stay_within_1000_points(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    sub, _ = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    session.commit()
    first = await _ask(client, world.student, sub.id, "Case two is wrong.")
    r = await _answer(client, world.ta, first, decision="adjust", points=2)
    assert r.status_code == 200 and r.json()["points"] == 2
    assert _score(session, world, world.student.email) == "8"
    # A second request about the same submission, answered with points taken away: they add.
    second = await _ask(client, world.student, sub.id, "And case three?")
    for points, words in ((0, "not 0"), (1000.5, "at most 1000 points"), (-1000.5, "at most")):
        r = await _answer(client, world.instructor, second, decision="adjust", points=points)
        assert r.status_code == 422 and words in r.json()["detail"], (points, r.text)
    r = await _answer(client, world.instructor, second, decision="adjust", points=-0.5)
    assert r.status_code == 200, r.text
    assert _score(session, world, world.student.email) == "7.5"
    # The limit itself is taken.
    third = await _ask(client, world.student, sub.id, "One more look.")
    r = await _answer(client, world.instructor, third, decision="adjust", points=1000)
    assert r.status_code == 200, r.text
    assert _score(session, world, world.student.email) == "1007.5"
    # A declined request changes no points.
    fourth = await _ask(client, world.student, sub.id, "Really?")
    r = await _answer(client, world.ta, fourth, decision="decline", points=5)
    assert r.status_code == 200 and r.json()["state"] == "declined" and r.json()["points"] is None
    assert _score(session, world, world.student.email) == "1007.5"


async def test_a_request_is_read_by_its_student_and_the_courses_staff_only(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    elsewhere = make_world(session)
    sub, _ = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    theirs, _ = make_submission(session, user=world.other_student.user, lab=world.lab, score=5)
    session.commit()
    request_id = await _ask(client, world.student, sub.id, "Please look at case two.")
    other_id = await _ask(client, world.other_student, theirs.id, "Mine too.")
    url = f"/api/v1/regrade-requests/{request_id}"
    for reader in (world.student, world.ta, world.instructor):
        r = await client.get(url, headers=reader.auth)
        assert r.status_code == 200 and r.json()["text"] == "Please look at case two."
    for stranger in (world.other_student, world.outsider, elsewhere.ta, elsewhere.instructor):
        r = await client.get(url, headers=stranger.auth)
        assert r.status_code == 404, stranger.email
        assert "Please look" not in r.text
        # Nor withdraw it.
        w = await client.post(f"{url}/withdraw", headers=stranger.auth)
        assert w.status_code in (403, 404), stranger.email
    # A student's list of the lab's requests holds their own only; the staff's, all.
    queue = f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/regrade-requests"
    mine = await client.get(queue, headers=world.other_student.auth)
    assert [q["id"] for q in mine.json()] == [other_id]
    staff = await client.get(queue, headers=world.ta.auth)
    assert [q["id"] for q in staff.json()] == [request_id, other_id]
    assert (await client.get(queue, headers=elsewhere.ta.auth)).status_code == 403
    # Its own student withdraws it; then it is closed to answers.
    assert (await client.post(f"{url}/withdraw", headers=world.student.auth)).status_code == 200
    late = await _answer(client, world.ta, request_id, decision="decline")
    assert late.status_code == 409 and "withdrawn already" in late.json()["detail"]
