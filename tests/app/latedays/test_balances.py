"""What each student has left, through the API: a balance taken exactly to zero, never below; a
course's grants and charges stay in that course; a team's late submission, graded by the
worker, charges every member it counts for; and the staff's list of every student."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.models import Role
from app.courses.service import enroll
from tests.app.conftest import GOOD_KERNEL, Member, World, make_member, make_world
from tests.app.latedays.helpers import graded, record_graded

pytestmark = pytest.mark.anyio


def budget_world(session: Session, *, days: int = 2, late_by: timedelta | None = None) -> World:
    due = utcnow() - (late_by or timedelta(days=5))
    world = make_world(session, due_at=due)
    world.course.late_days = days
    session.commit()
    return world


async def _mine(client: httpx.AsyncClient, world: World, who: Member) -> dict:
    r = await client.get(f"/api/v1/courses/{world.course.slug}/late-days/me", headers=who.auth)
    assert r.status_code == 200, r.text
    return r.json()


async def _adjust(
    client: httpx.AsyncClient, world: World, student: Member, days: int, by: Member | None = None
) -> httpx.Response:
    return await client.post(
        f"/api/v1/courses/{world.course.slug}/late-days/{student.email}/adjustments",
        headers=(by or world.ta).auth,
        json={"days": days, "reason": "a documented absence"},
    )


async def test_a_balance_is_taken_exactly_to_zero_and_not_below(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = budget_world(session, days=3)
    due = world.lab.due_at
    assert due is not None
    graded(session, user=world.student.user, lab=world.lab, at=due + timedelta(hours=2))
    session.commit()
    assert (await _mine(client, world, world.student))["left"] == 2
    # Exactly what is left: taken, to zero.
    r = await _adjust(client, world, world.student, -2)
    assert r.status_code == 200, r.text
    assert (r.json()["adjusted"], r.json()["spent"], r.json()["left"]) == (-2, 1, 0)
    assert r.json()["history"][0]["remaining_after"] == 0
    # One more is refused with a sentence, and changes nothing.
    r = await _adjust(client, world, world.student, -1)
    assert r.status_code == 422
    assert "has 0 late days left; taking 1 would leave fewer than none" in r.json()["detail"]
    mine = await _mine(client, world, world.student)
    assert (mine["left"], [e["kind"] for e in mine["history"]]) == (0, ["adjust", "spend"])
    # A student with nothing spent: their whole budget can go, not a day more.
    assert (await _adjust(client, world, world.other_student, -4)).status_code == 422
    r = await _adjust(client, world, world.other_student, -3)
    assert r.status_code == 200 and r.json()["left"] == 0
    # The most one adjustment moves is 365 days, either way.
    assert (await _adjust(client, world, world.other_student, 365)).json()["left"] == 365
    big = await _adjust(client, world, world.other_student, 366)
    assert big.status_code == 422 and "by 1 to 365" in big.json()["detail"]


async def test_one_courses_grants_and_charges_stay_in_that_course(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = budget_world(session, days=2)
    other = budget_world(session, days=4)
    # The same student in both courses.
    enroll(session, user=world.student.user, course=other.course, role=Role.student)
    session.commit()
    due = world.lab.due_at
    assert due is not None
    graded(session, user=world.student.user, lab=world.lab, at=due + timedelta(hours=3))
    session.commit()
    assert (await _adjust(client, world, world.student, 5)).status_code == 200
    here = await _mine(client, world, world.student)
    assert (here["budget"], here["adjusted"], here["spent"], here["left"]) == (2, 5, 1, 6)
    r = await client.get(
        f"/api/v1/courses/{other.course.slug}/late-days/me", headers=world.student.auth
    )
    there = r.json()
    assert (there["budget"], there["adjusted"], there["spent"], there["left"]) == (4, 0, 0, 4)
    assert there["history"] == [] and there["labs"] == []
    listed = await client.get(
        f"/api/v1/courses/{other.course.slug}/late-days", headers=other.ta.auth
    )
    row = next(x for x in listed.json() if x["student"] == world.student.email)
    assert (row["adjusted"], row["spent"], row["left"]) == (0, 0, 4)
    # Taking days away in the other course is measured against its own balance.
    refused = await _adjust(client, other, world.student, -5, by=other.ta)
    assert refused.status_code == 422 and "has 4 late days left" in refused.json()["detail"]
    # And another course's staff reach neither the list nor the adjustments here.
    assert (
        await client.get(f"/api/v1/courses/{world.course.slug}/late-days", headers=other.ta.auth)
    ).status_code == 403
    assert (await _adjust(client, world, world.student, 1, by=other.ta)).status_code == 403


async def test_the_staff_list_every_students_balance(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = budget_world(session, days=3)
    third = make_member(session, world.course, Role.student)
    due = world.lab.due_at
    assert due is not None
    graded(session, user=world.student.user, lab=world.lab, at=due + timedelta(hours=30))
    session.commit()
    assert (await _adjust(client, world, world.other_student, 2)).status_code == 200
    assert (await _adjust(client, world, third, -1)).status_code == 200
    url = f"/api/v1/courses/{world.course.slug}/late-days"
    for staff in (world.ta, world.instructor):
        r = await client.get(url, headers=staff.auth)
        assert r.status_code == 200, r.text
        rows = [(x["student"], x["budget"], x["adjusted"], x["spent"], x["left"]) for x in r.json()]
        # Every student, by email; no staff; budget + adjustments - spent = left.
        assert rows == sorted(
            [
                (world.student.email, 3, 0, 2, 1),
                (world.other_student.email, 3, 2, 0, 5),
                (third.email, 3, -1, 0, 2),
            ]
        )
    for student in (world.student, world.outsider):
        assert (await client.get(url, headers=student.auth)).status_code == 403
    # One student's own page, for the staff, agrees with the list.
    one = await client.get(f"{url}/{world.student.email}", headers=world.ta.auth)
    assert one.status_code == 200
    assert (one.json()["spent"], one.json()["left"]) == (2, 1)
    assert one.json()["labs"][0]["days_late"] == 2
    assert (await client.get(f"{url}/{world.student.email}", headers=third.auth)).status_code == 403


async def test_a_teams_late_submission_charges_every_member_it_counts_for(
    client: httpx.AsyncClient, session: Session
) -> None:
    # Due 26 hours ago: two started days late.
    world = budget_world(session, days=3, late_by=timedelta(hours=26))
    world.lab.team_size = 2
    world.pair_up(session, now=utcnow() - timedelta(days=3), name="Late Pair")
    loner = make_member(session, world.course, Role.student)
    session.commit()
    r = await client.post(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/submissions",
        headers=world.student.auth,
        files={"file": ("scale.cu", GOOD_KERNEL.encode(), "text/plain")},
    )
    assert r.status_code == 202, r.text
    sid = int(r.json()["id"])
    # A GPU worker records its verdict (its own function, in its own transaction).
    record_graded(sid, score=7)
    for member in (world.student, world.other_student):
        mine = await _mine(client, world, member)
        assert (mine["spent"], mine["left"]) == (2, 1), (member.email, mine)
        assert mine["labs"] == [
            {"lab": world.lab.slug, "submission": sid, "days_late": 2, "days_spent": 2}
        ]
        kinds = [e["kind"] for e in mine["history"]]
        assert kinds[0] == "spend" and kinds.count("spend") == 1, (member.email, kinds)
    # A student outside the team spends nothing.
    assert (await _mine(client, world, loner))["spent"] == 0
