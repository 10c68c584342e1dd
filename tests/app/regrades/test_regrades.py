"""Regrade requests: a student asks, the staff answer from the lab's queue (regrade, adjust or
decline), the student reads the answer, the window closes after the grades' release, every
change is recorded; and rubric points on top of the autograde."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.gradebook.service import canvas_csv, gradebook_csv
from app.rubric.service import add_item
from app.submissions.models import GradingJob, JobState, Status
from tests.app.conftest import make_world
from tests.app.factories import make_submission

pytestmark = pytest.mark.anyio


def _row(text: str, email: str) -> list[str]:
    return next(r for r in csv.reader(io.StringIO(text)) if email in r)


async def test_ask_answer_with_points_and_the_student_reads_it(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    sub, _ = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    session.commit()
    r = await client.post(
        f"/api/v1/submissions/{sub.id}/regrade-requests",
        headers=world.student.auth,
        json={"text": "My kernel handles n=0; the case says it does not."},
    )
    assert r.status_code == 201, r.text
    request_id = r.json()["id"]
    # One open request per submission at a time.
    again = await client.post(
        f"/api/v1/submissions/{sub.id}/regrade-requests",
        headers=world.student.auth,
        json={"text": "And another thing."},
    )
    assert again.status_code == 409
    queue = await client.get(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/regrade-requests",
        headers=world.ta.auth,
    )
    assert [q["id"] for q in queue.json()] == [request_id]
    r = await client.post(
        f"/api/v1/regrade-requests/{request_id}/answer",
        headers=world.ta.auth,
        json={"decision": "adjust", "answer": "Right: the n=0 case was wrong.", "points": 2},
    )
    assert r.status_code == 200, r.text
    assert (r.json()["state"], r.json()["outcome"], r.json()["points"]) == ("accepted", "adjust", 2)
    seen = await client.get(f"/api/v1/regrade-requests/{request_id}", headers=world.student.auth)
    body = seen.json()
    assert body["answer"] == "Right: the n=0 case was wrong."
    assert [h["action"] for h in body["history"]] == ["asked", "accepted: adjust"]
    assert body["history"][1]["by"] == world.ta.email
    # The gradebook counts the adjusted score, in both formats.
    assert _row(gradebook_csv(session, course=world.course), world.student.email)[3] == "8"
    assert _row(canvas_csv(session, course=world.course), world.student.email)[5] == "8"
    # Answered once: a second answer is refused.
    twice = await client.post(
        f"/api/v1/regrade-requests/{request_id}/answer",
        headers=world.instructor.auth,
        json={"decision": "decline", "answer": "No."},
    )
    assert twice.status_code == 409


async def test_accepting_with_a_regrade_queues_a_grading(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    sub, _ = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    session.commit()
    r = await client.post(
        f"/api/v1/submissions/{sub.id}/regrade-requests",
        headers=world.student.auth,
        json={"text": "Graded on a busy GPU?", "case": ""},
    )
    request_id = r.json()["id"]
    r = await client.post(
        f"/api/v1/regrade-requests/{request_id}/answer",
        headers=world.instructor.auth,
        json={"decision": "regrade", "answer": "Graded again."},
    )
    assert r.status_code == 200, r.text
    states = session.scalars(
        select(GradingJob.state).where(GradingJob.submission_id == sub.id).order_by(GradingJob.id)
    ).all()
    assert states == [JobState.done.value, JobState.queued.value]


async def test_bad_requests_get_a_sentence_and_change_nothing(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    sub, _ = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    pending, _ = make_submission(
        session,
        user=world.student.user,
        lab=world.lab,
        status=Status.queued,
        job_state=JobState.queued,
    )
    session.commit()
    url = f"/api/v1/submissions/{sub.id}/regrade-requests"
    cases = [
        (world.student.auth, {"text": "x" * 2001}, 422, "more than the 2000 allowed"),
        (world.student.auth, {"text": "   "}, 422, "cannot be empty"),
        (world.student.auth, {"text": "why?", "case": "nope"}, 422, "no test case 'nope'"),
        (world.other_student.auth, {"text": "not mine"}, 404, "no submission"),
        (world.ta.auth, {"text": "staff"}, 403, "Staff regrade a submission directly"),
    ]
    for auth, body, code, words in cases:
        r = await client.post(url, headers=auth, json=body)
        assert r.status_code == code, r.text
        assert words in r.json()["detail"]
    r = await client.post(
        f"/api/v1/submissions/{pending.id}/regrade-requests",
        headers=world.student.auth,
        json={"text": "too early"},
    )
    assert r.status_code == 409 and "no verdict yet" in r.json()["detail"]
    queue = await client.get(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/regrade-requests?state=all",
        headers=world.ta.auth,
    )
    assert queue.json() == []


async def test_the_window_closes_after_the_grades_are_released(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session, due_at=utcnow() - timedelta(days=10))
    world.course.regrade_window_days = 7
    sub, _ = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    session.commit()
    r = await client.post(
        f"/api/v1/submissions/{sub.id}/regrade-requests",
        headers=world.student.auth,
        json={"text": "Please look again."},
    )
    assert r.status_code == 403, r.text
    assert "closed at" in r.json()["detail"] and "7 days after" in r.json()["detail"]
    # Released later by the staff: the window is open again until 7 days after that.
    r = await client.patch(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}",
        headers=world.instructor.auth,
        json={"grades_released_at": (utcnow() - timedelta(days=1)).isoformat()},
    )
    assert r.status_code == 200, r.text
    r = await client.post(
        f"/api/v1/submissions/{sub.id}/regrade-requests",
        headers=world.student.auth,
        json={"text": "Please look again."},
    )
    assert r.status_code == 201, r.text


async def test_rubric_points_add_to_the_counted_score_and_show_after_release(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session, due_at=utcnow() + timedelta(days=1))
    make_submission(session, user=world.student.user, lab=world.lab, score=6)
    session.commit()
    base = f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/rubric"
    r = await client.post(
        f"{base}/items", headers=world.ta.auth, json={"title": "Code quality", "max_points": 5}
    )
    assert r.status_code == 403  # instructors add items
    r = await client.post(
        f"{base}/items",
        headers=world.instructor.auth,
        json={"title": "Code quality", "max_points": 5, "description": "names, comments"},
    )
    assert r.status_code == 201, r.text
    item = r.json()[0]["id"]
    r = await client.post(
        f"{base}/items/{item}/comments",
        headers=world.ta.auth,
        json={"text": "Clear names; explain the tiling."},
    )
    assert r.json()[0]["comments"] == ["Clear names; explain the tiling."]
    over = await client.put(
        f"{base}/grades/{world.student.email}",
        headers=world.ta.auth,
        json={"scores": [{"item": item, "points": 6}]},
    )
    assert over.status_code == 422 and "outside 0 to 5" in over.json()["detail"]
    r = await client.put(
        f"{base}/grades/{world.student.email}",
        headers=world.ta.auth,
        json={"scores": [{"item": item, "points": 4, "comment": "Clear names."}]},
    )
    assert r.status_code == 200, r.text
    assert r.json()["total"] == 4
    assert _row(gradebook_csv(session, course=world.course), world.student.email)[3] == "10"
    canvas = list(csv.reader(io.StringIO(canvas_csv(session, course=world.course))))
    assert canvas[1][5] == "15"  # points possible: 10 autograded + 5 rubric
    # Before release the student does not see them; after, they do.
    mine = await client.get(f"{base}/grades/{world.student.email}", headers=world.student.auth)
    assert mine.status_code == 403 and "not released yet" in mine.json()["detail"]
    other = await client.get(
        f"{base}/grades/{world.student.email}", headers=world.other_student.auth
    )
    assert other.status_code == 403
    add_item(session, lab=world.lab, title="Report", max_points=2)
    world.lab.grades_released_at = utcnow() - timedelta(minutes=1)
    session.commit()
    mine = await client.get(f"{base}/grades/{world.student.email}", headers=world.student.auth)
    assert mine.status_code == 200
    assert [(s["title"], s["points"]) for s in mine.json()["scores"]] == [
        ("Code quality", 4.0),
        ("Report", None),
    ]
