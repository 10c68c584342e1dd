"""One open regrade request per submission, held by the database (issue 31, classes 12 and 17):
thirty asks at once against a real server open one request and answer the others 409 with a
sentence, never 500, on SQLite and PostgreSQL; two teammates asking about their team's
submission at once open one between them; accepting points adds them once; and the migration
closes the duplicates that main let in before the constraint."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.regrades.models import RegradeRequest, RequestState
from app.submissions.models import Submission
from tests.app.conftest import make_world
from tests.app.factories import make_submission
from tests.app.races import at_once, codes, live, race_database  # noqa: F401

pytestmark = pytest.mark.anyio


def _ask(submission_id: int, auth: dict[str, str], n: int) -> tuple[str, str, dict]:
    body = {"text": f"Case {n}: my kernel handles n=0; the message says it does not."}
    return ("POST", f"/api/v1/submissions/{submission_id}/regrade-requests", {
        "headers": auth, "json": body,
    })  # fmt: skip


def _open(session: Session, submission_id: int) -> list[int]:
    session.expire_all()
    return list(
        session.scalars(
            select(RegradeRequest.id).where(
                RegradeRequest.submission_id == submission_id,
                RegradeRequest.state == RequestState.open.value,
            )
        )
    )


async def test_thirty_asks_at_once_open_one_request_and_points_are_added_once(
    live: str,  # noqa: F811
    session: Session,
) -> None:
    world = make_world(session)
    sub, _ = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    session.commit()
    answers = await at_once(live, [_ask(sub.id, world.student.auth, n) for n in range(30)])
    assert codes(answers) == {201: 1, 409: 29}, [r.text for r in answers if r.status_code >= 500]
    refused = next(r for r in answers if r.status_code == 409).json()["detail"]
    assert "You already have an open request" in refused and "withdraw it" in refused
    (opened,) = _open(session, sub.id)
    # Accepted with points by two staff at once: added once.
    accept = {"decision": "adjust", "answer": "Right: the n=0 case was wrong.", "points": 2}
    answered = await at_once(
        live,
        [
            (
                "POST",
                f"/api/v1/regrade-requests/{opened}/answer",
                {
                    "headers": member.auth,
                    "json": accept,
                },
            )  # fmt: skip
            for member in (world.ta, world.instructor, world.ta, world.instructor)
        ],
    )
    assert codes(answered) == {200: 1, 409: 3}
    session.expire_all()
    assert session.get_one(Submission, sub.id).points_adjustment == 2
    # Answered, the submission may be asked about again: one more, not two.
    again = await at_once(live, [_ask(sub.id, world.student.auth, n) for n in range(2)])
    assert codes(again) == {201: 1, 409: 1}


async def test_teammates_asking_at_once_open_one_request_between_them(
    live: str,  # noqa: F811
    session: Session,
) -> None:
    world = make_world(session)
    world.lab.team_size = 2
    world.pair_up(session, now=utcnow() - timedelta(hours=1))
    sub, _ = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    from app.submissions.credits import credit_submission

    credit_submission(session, submission=sub, lab=world.lab)
    session.commit()
    asks = [_ask(sub.id, m.auth, n) for n in range(8) for m in (world.student, world.other_student)]
    answers = await at_once(live, asks)
    assert codes(answers) == {201: 1, 409: 15}
    assert len(_open(session, sub.id)) == 1
    asker = next(r for r in answers if r.status_code == 201).json()
    teammate = world.other_student if asker["student"] == world.student.email else world.student
    told = next(
        r.json()["detail"]
        for r, (_, _, kwargs) in zip(answers, asks, strict=True)
        if r.status_code == 409 and kwargs["headers"] == teammate.auth
    )
    assert f"Your teammate {asker['student']} already has an open request" in told
