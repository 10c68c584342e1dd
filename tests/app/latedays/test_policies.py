"""A course's late-day policy through the API, word for word: the budget (0 to 365, never below
what a student spent), the per-lab cap (0 to 365 or none), the regrade window, each change's
sentence, and the staff's adjustments (a reason of 1 to 500 characters, students only); and
what days given back cover, earliest due first."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.courses.service import add_lab
from tests.app.conftest import Member, World, make_world
from tests.app.latedays.helpers import graded

pytestmark = pytest.mark.anyio


async def _patch(client: httpx.AsyncClient, world: World, **body: object) -> httpx.Response:
    return await client.patch(
        f"/api/v1/courses/{world.course.slug}/policies", headers=world.instructor.auth, json=body
    )


async def _adjust(
    client: httpx.AsyncClient, world: World, student: Member, days: int, reason: str
) -> httpx.Response:
    return await client.post(
        f"/api/v1/courses/{world.course.slug}/late-days/{student.email}/adjustments",
        headers=world.ta.auth,
        json={"days": days, "reason": reason},
    )


def _detail(r: httpx.Response, code: int) -> str:
    assert r.status_code == code, r.text
    return str(r.json()["detail"])


async def test_the_budget_cap_and_window_each_say_what_changed(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    r = await _patch(client, world, late_days=365, late_day_cap=0, regrade_window_days=365)
    assert r.status_code == 200, r.text
    assert r.json()["changes"] == [
        "takes regrade requests until 365 days after a lab's grades are released",
        "gives 365 late days per student",
        "caps late days at 0 per lab",
    ]
    assert (r.json()["late_days"], r.json()["late_day_cap"]) == (365, 0)
    # The same values again: nothing to say.
    same = await _patch(client, world, late_days=365, late_day_cap=0, regrade_window_days=365)
    assert same.json()["changes"] == []
    r = await _patch(client, world, late_days=0, late_day_cap=None, regrade_window_days=0)
    assert r.json()["changes"] == [
        "takes regrade requests until 0 days after a lab's grades are released",
        "gives no late days",
        "has no cap",
    ]
    assert r.json()["late_day_cap"] is None
    # A cap left out stays as it is.
    await _patch(client, world, late_day_cap=2)
    assert (await _patch(client, world, late_days=4)).json()["late_day_cap"] == 2
    for body, sentence in (
        ({"late_days": 366}, "A late-day budget is 0 to 365 days (0: none); 366 is not."),
        ({"late_days": -1}, "A late-day budget is 0 to 365 days (0: none); -1 is not."),
        ({"late_day_cap": 366}, "A per-lab cap is 0 to 365 days, or none."),
        ({"late_day_cap": -1}, "A per-lab cap is 0 to 365 days, or none."),
        (
            {"regrade_window_days": 366},
            "The regrade window is 0 to 365 days after grades are released; 366 is not.",
        ),
        (
            {"regrade_window_days": -1},
            "The regrade window is 0 to 365 days after grades are released; -1 is not.",
        ),
    ):
        assert _detail(await _patch(client, world, **body), 422) == sentence, body
    r = await client.get(f"/api/v1/courses/{world.course.slug}/policies", headers=world.ta.auth)
    assert (r.json()["late_days"], r.json()["late_day_cap"]) == (4, 2)
    assert r.json()["regrade_window_days"] == 0


async def test_the_budget_never_goes_below_what_a_student_spent(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session, due_at=utcnow() - timedelta(days=5))
    world.course.late_days = 5
    session.commit()
    due = world.lab.due_at
    assert due is not None
    graded(session, user=world.student.user, lab=world.lab, at=due + timedelta(hours=50))
    graded(session, user=world.other_student.user, lab=world.lab, at=due + timedelta(hours=2))
    session.commit()
    # The most any one student spent is 3 (another spent 1).
    assert _detail(await _patch(client, world, late_days=2), 422) == (
        f"A student has already spent 3 late days in {world.course.slug} (or holds them for "
        "late uploads still being graded); the budget cannot go below that. Refund them first, "
        "or keep at least 3."
    )
    r = await _patch(client, world, late_days=3)
    assert r.status_code == 200 and r.json()["changes"] == ["gives 3 late days per student"]


async def test_an_adjustment_needs_a_reason_and_a_student_of_the_course(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = make_world(session)
    world.course.late_days = 1
    session.commit()
    say_why = "Say why the late days change; the student and the staff see the reason."
    assert _detail(await _adjust(client, world, world.student, 1, " \n "), 422) == say_why
    assert _detail(await _adjust(client, world, world.student, 1, "r" * 501), 422) == (
        "The reason is longer than 500 characters; shorten it."
    )
    r = await _adjust(client, world, world.student, 1, "  two  \n words " + "r" * 480)
    assert r.status_code == 200, r.text
    assert r.json()["history"][0]["reason"] == "two words " + "r" * 480
    for days in (0, 366, -366):
        assert _detail(await _adjust(client, world, world.student, days, "ok"), 422) == (
            "Change the late days by 1 to 365 days, up or down."
        )
    for staff in (world.ta, world.instructor):
        r = await _adjust(client, world, staff, 1, "not a student")
        assert _detail(r, 404) == f"{staff.email} is not a student of {world.course.slug}."
    r = await client.get(
        f"/api/v1/courses/{world.course.slug}/late-days/{world.student.email}",
        headers=world.ta.auth,
    )
    assert [(e["kind"], e["delta"], e["remaining_after"]) for e in r.json()["history"]] == [
        ("adjust", 1, 2)
    ]


async def test_days_given_cover_the_labs_still_late_within_each_labs_cap(
    client: httpx.AsyncClient, session: Session
) -> None:
    now = utcnow()
    world = make_world(session, due_at=now - timedelta(days=6))
    later = add_lab(
        session, course=world.course, ref="vector-scale", due_at=now - timedelta(days=4)
    )
    world.course.late_days = 0
    session.commit()
    first_due, second_due = world.lab.due_at, later.due_at
    assert first_due is not None and second_due is not None
    # Late on both labs with no days to spend: both stay late, nothing charged.
    graded(session, user=world.student.user, lab=later, at=second_due + timedelta(hours=30))
    graded(session, user=world.student.user, lab=world.lab, at=first_due + timedelta(hours=5))
    session.commit()
    url = f"/api/v1/courses/{world.course.slug}/late-days/me"
    assert (await client.get(url, headers=world.student.auth)).json()["labs"] == []
    # A budget of 2: the first lab takes the 1 day it is late, the other the 1 left of its 2.
    assert (await _patch(client, world, late_days=2)).status_code == 200
    mine = (await client.get(url, headers=world.student.auth)).json()
    spent = {u["lab"]: (u["days_late"], u["days_spent"]) for u in mine["labs"]}
    assert spent == {world.lab.slug: (1, 1), later.slug: (2, 1)}
    assert mine["left"] == 0
    # A day given covers the lab still short; a second one stays, as no lab is short now.
    r = await _adjust(client, world, world.student, 1, "a documented illness")
    assert r.status_code == 200, r.text
    assert {u["lab"]: u["days_spent"] for u in r.json()["labs"]} == {
        world.lab.slug: 1,
        later.slug: 2,
    }
    assert r.json()["left"] == 0
    r = await _adjust(client, world, world.student, 1, "another")
    assert r.json()["left"] == 1
    assert [(e["kind"], e["lab"]) for e in reversed(r.json()["history"])] == [
        ("spend", world.lab.slug),
        ("spend", later.slug),
        ("adjust", None),
        ("spend", later.slug),
        ("adjust", None),
    ]
    # A cap of 1 per lab: the later lab gives a day back.
    r = await _patch(client, world, late_day_cap=1)
    assert r.status_code == 200
    mine = (await client.get(url, headers=world.student.auth)).json()
    assert {u["lab"]: u["days_spent"] for u in mine["labs"]} == {world.lab.slug: 1, later.slug: 1}
    assert mine["left"] == 2 and mine["history"][0]["kind"] == "refund"
