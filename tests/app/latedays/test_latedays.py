"""Late-day budgets: spent when a late submission counts, capped per lab, given back when an
extension covers it, adjusted by staff with a reason, and what the gradebook, the Canvas export
and a refusing lab make of them."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import LatePolicy
from app.gradebook.service import canvas_csv, gradebook_csv
from app.latedays.models import LateDayCharge, LateDayEvent
from app.latedays.service import balance
from app.policy.rules import grant_extension
from tests.app.conftest import GOOD_KERNEL, World, make_world
from tests.app.latedays.helpers import graded

pytestmark = pytest.mark.anyio


def _rows(text: str) -> dict[str, list[str]]:
    table = list(csv.reader(io.StringIO(text)))
    return {"header": table[0], **{row[2]: row for row in table[1:]}}


def budget_world(session: Session, *, days: int = 3, cap: int | None = None) -> World:
    world = make_world(session, due_at=utcnow() - timedelta(days=5))
    world.course.late_days = days
    world.course.late_day_cap = cap
    session.commit()
    return world


async def test_a_counted_late_submission_spends_days_and_the_student_sees_what_is_left(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = budget_world(session)
    due = world.lab.due_at
    assert due is not None
    # 1 day and 2 hours late: two started days.
    graded(session, user=world.student.user, lab=world.lab, at=due + timedelta(hours=26))
    session.commit()
    charge = session.scalars(
        select(LateDayCharge).where(LateDayCharge.user_id == world.student.user.id)
    ).one()
    assert (charge.days, charge.days_late) == (2, 2)
    r = await client.get(
        f"/api/v1/courses/{world.course.slug}/late-days/me", headers=world.student.auth
    )
    assert r.status_code == 200, r.text
    mine = r.json()
    assert (mine["budget"], mine["spent"], mine["left"]) == (3, 2, 1)
    assert mine["labs"] == [
        {"lab": "scale-test", "submission": charge.submission_id, "days_late": 2, "days_spent": 2}
    ]
    assert [e["kind"] for e in mine["history"]] == ["spend"]
    book = _rows(gradebook_csv(session, course=world.course))
    assert book["header"][3:] == [
        "scale-test",
        "scale-test_late",
        "scale-test_pending",
        "scale-test_late_days",
        "late_days_left",
        "total",
    ]
    # Covered: not late in the gradebook, two days spent, one left.
    assert book[world.student.email][3:] == ["10", "0", "0", "2", "1", "10"]
    assert book[world.other_student.email][3:] == ["", "", "0", "0", "3", "0"]


def test_beyond_the_cap_it_stays_late_and_the_penalty_shows_in_both_exports(
    session: Session,
) -> None:
    world = budget_world(session, days=3, cap=1)
    world.lab.late_penalty = 10.0  # percent per late day not covered
    session.commit()
    due = world.lab.due_at
    assert due is not None
    graded(session, user=world.student.user, lab=world.lab, at=due + timedelta(hours=30))
    session.commit()
    assert balance(session, course=world.course, user_id=world.student.user.id).left == 2
    book = _rows(gradebook_csv(session, course=world.course))
    # Two days late, one covered: late, and 10 % of 10 taken for the other.
    assert book[world.student.email][3:7] == ["9", "1", "0", "1"]
    canvas = list(csv.reader(io.StringIO(canvas_csv(session, course=world.course))))
    row = next(r for r in canvas if r[3] == world.student.email)
    assert row[5] == "9"


def test_two_labs_share_the_budget_first_counted_first_served(session: Session) -> None:
    from app.courses.service import add_lab

    world = budget_world(session, days=2)
    second = add_lab(
        session, course=world.course, ref="vector-scale", due_at=utcnow() - timedelta(days=4)
    )
    session.commit()
    due = world.lab.due_at
    assert due is not None and second.due_at is not None
    graded(session, user=world.student.user, lab=world.lab, at=due + timedelta(hours=30))
    graded(session, user=world.student.user, lab=second, at=second.due_at + timedelta(hours=1))
    session.commit()
    charges = {
        c.lab_id: c.days
        for c in session.scalars(
            select(LateDayCharge).where(LateDayCharge.user_id == world.student.user.id)
        )
    }
    assert charges == {world.lab.id: 2, second.id: 0}
    # A day given later covers the lab still short.
    from app.policy.settle import adjust

    adjust(
        session,
        course=world.course,
        student=world.student.user,
        delta=1,
        reason="illness, documented",
        by=world.instructor.user,
        now=utcnow(),
    )
    session.commit()
    covered = session.scalars(select(LateDayCharge).where(LateDayCharge.lab_id == second.id)).one()
    assert covered.days == 1
    assert balance(session, course=world.course, user_id=world.student.user.id).left == 0


def test_an_extension_wins_and_gives_the_days_back(session: Session) -> None:
    world = budget_world(session)
    due = world.lab.due_at
    assert due is not None
    graded(session, user=world.student.user, lab=world.lab, at=due + timedelta(hours=20))
    session.commit()
    assert balance(session, course=world.course, user_id=world.student.user.id).left == 2
    grant_extension(
        session,
        course=world.course,
        lab=world.lab,
        student=world.student.user,
        due_at=due + timedelta(days=1),
        granted_by=world.ta.user,
    )
    session.commit()
    assert balance(session, course=world.course, user_id=world.student.user.id).left == 3
    kinds = session.scalars(
        select(LateDayEvent.kind)
        .where(LateDayEvent.user_id == world.student.user.id)
        .order_by(LateDayEvent.id)
    ).all()
    assert kinds == ["spend", "refund"]
    book = _rows(gradebook_csv(session, course=world.course))
    assert book[world.student.email][3:7] == ["10", "0", "0", "0"]


async def test_staff_adjust_with_a_reason_and_bad_input_changes_nothing(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = budget_world(session, days=2)
    base = f"/api/v1/courses/{world.course.slug}"
    r = await client.post(
        f"{base}/late-days/{world.student.email}/adjustments",
        headers=world.ta.auth,
        json={"days": 1, "reason": "travel for a conference"},
    )
    assert r.status_code == 200, r.text
    assert r.json()["left"] == 3
    assert r.json()["history"][0]["reason"] == "travel for a conference"
    for body, words in [
        ({"days": 1, "reason": "  "}, "Say why"),
        ({"days": -4, "reason": "too many"}, "has 3 late days left"),
        ({"days": 0, "reason": "nothing"}, "by 1 to"),
    ]:
        r = await client.post(
            f"{base}/late-days/{world.student.email}/adjustments", headers=world.ta.auth, json=body
        )
        assert r.status_code == 422, r.text
        assert words in r.json()["detail"]
    # Students may not adjust; a negative budget is a sentence, and changes nothing.
    r = await client.post(
        f"{base}/late-days/{world.student.email}/adjustments",
        headers=world.student.auth,
        json={"days": 5, "reason": "please"},
    )
    assert r.status_code == 403
    r = await client.patch(
        f"{base}/policies", headers=world.instructor.auth, json={"late_days": -1}
    )
    assert r.status_code == 422
    assert "0 to 365" in r.json()["detail"]
    r = await client.get(f"{base}/policies", headers=world.student.auth)
    assert r.json()["late_days"] == 2
    left = await client.get(f"{base}/late-days/me", headers=world.student.auth)
    assert left.json()["left"] == 3


async def test_a_refusing_lab_takes_late_work_while_late_days_cover_it(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session, late_policy=LatePolicy.refuse, due_at=utcnow() - timedelta(hours=3))
    url = f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/submissions"
    files = {"file": ("scale.cu", GOOD_KERNEL.encode(), "text/plain")}
    r = await client.post(url, headers=world.student.auth, files=files)
    assert r.status_code == 403
    world.course.late_days = 1
    session.commit()
    r = await client.post(url, headers=world.student.auth, files=files)
    assert r.status_code == 202, r.text
    # Spent by another lab's counting, the day no longer covers this one.
    world.course.late_days = 0
    session.commit()
    r = await client.post(url, headers=world.other_student.auth, files=files)
    assert r.status_code == 403
    assert "does not accept late submissions" in r.json()["detail"]
