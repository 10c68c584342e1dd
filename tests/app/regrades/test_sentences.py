"""What a student and the staff read about a regrade request, word for word, and what each
answer records: the request's text (1 to 2000 characters) and case, the answer (1 to 4000), the
decision, the queue's filters, and every change with who made it."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.regrades.models import RegradeEvent
from app.submissions.models import CaseResult, GradingJob
from tests.app.conftest import World, make_world
from tests.app.factories import make_submission
from tests.app.regrades.test_answers import _answer, _ask
from tests.app.web.test_routes import csrf_of, login

pytestmark = pytest.mark.anyio


def _detail(r: httpx.Response, code: int) -> str:
    assert r.status_code == code, r.text
    return str(r.json()["detail"])


def _with_case(session: Session, world: World, name: str) -> int:
    sub, job = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    session.add(CaseResult(job_id=job.id, name=name, sizes={"n": 1}, hidden=False, verdict="fail"))
    session.commit()
    return sub.id


async def test_a_request_names_its_case_and_keeps_its_text(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    sid = _with_case(session, world, "n-1000")
    url = f"/api/v1/submissions/{sid}/regrade-requests"
    r = await client.post(
        url, headers=world.student.auth, json={"text": "x" * 2000, "case": " n-1000 "}
    )
    assert r.status_code == 201, r.text
    assert (r.json()["case"], len(r.json()["text"])) == ("n-1000", 2000)
    request_id = r.json()["id"]
    assert (
        await client.post(
            f"/api/v1/regrade-requests/{request_id}/withdraw", headers=world.student.auth
        )
    ).json()["state"] == "withdrawn"
    r = await client.post(url, headers=world.student.auth, json={"text": "y" * 2001})
    assert _detail(r, 422) == (
        "The request is 2001 characters, more than the 2000 allowed; shorten it."
    )
    r = await client.post(url, headers=world.student.auth, json={"text": " \n "})
    assert _detail(r, 422) == "Write the request; it cannot be empty."
    r = await client.post(url, headers=world.student.auth, json={"text": "why", "case": "n-9"})
    assert _detail(r, 422) == (
        f"Submission {sid} has no test case 'n-9'; pick one of its cases, or leave the case "
        "empty to ask about the whole submission."
    )
    # Its text is kept as asked, its ends trimmed; withdrawn once, it stays withdrawn.
    r = await client.post(url, headers=world.student.auth, json={"text": "  Case n-1000?  "})
    assert r.status_code == 201 and r.json()["text"] == "Case n-1000?"
    again = await client.post(
        f"/api/v1/regrade-requests/{request_id}/withdraw", headers=world.student.auth
    )
    assert _detail(again, 409) == f"Request {request_id} was withdrawn already; it is closed."


async def test_an_answer_is_a_decision_with_a_reason(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    sub, _ = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    session.commit()
    request_id = await _ask(client, world.student, sub.id, "Case two?")
    for body, code, sentence in (
        ({"decision": "decline", "answer": "  "}, 422, "Write the answer; it cannot be empty."),
        (
            {"decision": "decline", "answer": "a" * 4001},
            422,
            "The answer is 4001 characters, more than the 4000 allowed; shorten it.",
        ),
        (
            {"decision": "adjust"},
            422,
            "Give the points to add (or, negative, to take away); not 0.",
        ),
    ):
        r = await client.post(
            f"/api/v1/regrade-requests/{request_id}/answer",
            headers=world.ta.auth,
            json={"answer": "Looked again.", **body},
        )
        assert _detail(r, code) == sentence, body
    # The page's form says which decisions there are (the API's schema lists them itself).
    await login(client, world.ta)
    form = await client.get(f"/regrade-requests/{request_id}")
    r = await client.post(
        f"/regrade-requests/{request_id}",
        data={"csrf_token": csrf_of(form.text), "action": "maybe", "answer": "Hm."},
    )
    assert r.status_code == 422 and "Choose regrade, adjust or decline." in r.text
    r = await _answer(client, world.ta, request_id, decision="adjust", points=1.5)
    assert r.status_code == 200
    body = r.json()
    assert (body["state"], body["outcome"], body["answer"]) == (
        "accepted",
        "adjust",
        "Looked again.",
    )
    assert body["answered_by"] == world.ta.email and body["answered_at"] is not None
    assert [(h["action"], h["by"], h["points"]) for h in body["history"]] == [
        ("asked", world.student.email, None),
        ("accepted: adjust", world.ta.email, 1.5),
    ]
    twice = await _answer(client, world.instructor, request_id, decision="decline")
    assert _detail(twice, 409) == f"Request {request_id} was accepted already; it is closed."
    # A regrade is an accepted request without points; a decline, a closed one without outcome.
    second = await _ask(client, world.student, sub.id, "And case three?")
    r = await _answer(client, world.instructor, second, decision="regrade")
    assert (r.json()["state"], r.json()["outcome"], r.json()["points"]) == (
        "accepted",
        "regrade",
        None,
    )
    third = await _ask(client, world.student, sub.id, "Last one.")
    r = await _answer(client, world.ta, third, decision="decline", answer="It stands.")
    assert (r.json()["state"], r.json()["outcome"]) == ("declined", "")
    session.expire_all()
    actions = session.scalars(
        select(RegradeEvent.action)
        .where(RegradeEvent.request_id == third)
        .order_by(RegradeEvent.id)
    ).all()
    assert actions == ["asked", "declined"]
    jobs = session.scalars(select(GradingJob.id).where(GradingJob.submission_id == sub.id)).all()
    assert len(jobs) == 2  # the first grading and the regrade's


async def test_the_queue_filters_by_state(client: httpx.AsyncClient, session: Session) -> None:
    world = make_world(session)
    sub, _ = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    theirs, _ = make_submission(session, user=world.other_student.user, lab=world.lab, score=6)
    session.commit()
    first = await _ask(client, world.student, sub.id, "One.")
    await _answer(client, world.ta, first, decision="decline")
    second = await _ask(client, world.other_student, theirs.id, "Two.")
    queue = f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/regrade-requests"

    async def ids(state: str | None) -> list[int]:
        params = {"state": state} if state is not None else {}
        r = await client.get(queue, headers=world.ta.auth, params=params)
        assert r.status_code == 200, r.text
        return [q["id"] for q in r.json()]

    assert await ids(None) == [second]  # open ones by default
    assert await ids("declined") == [first]
    assert await ids("all") == [first, second]
    assert await ids("accepted") == []
    r = await client.get(queue, headers=world.ta.auth, params={"state": "lost"})
    assert _detail(r, 422) == (
        "Filter by open, accepted, declined or withdrawn (or nothing for all)."
    )
    # The lab page counts the open ones for the staff.
    await login(client, world.ta)
    page = await client.get(f"/courses/{world.course.slug}/labs/{world.lab.slug}")
    assert "regrade requests (1 open)" in page.text
