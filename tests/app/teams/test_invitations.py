"""Students' own teams through the API: an invitation is answered only by the student it names,
a team never grows past its size (test_race.py: two answers at once), a student who left is
free to start or join another team, and a team's score reaches its own members only."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.mail import outbox
from app.courses.models import Role
from app.gradebook.service import gradebook_csv
from app.submissions.models import Submission
from app.teams.models import TeamInvite, TeamMember
from tests.app.conftest import GOOD_KERNEL, Member, World, make_member, make_world
from tests.app.mail.smtp import Inbox, body_of, mail_server  # noqa: F401

pytestmark = pytest.mark.anyio


def teamed_world(session: Session, size: int = 2) -> World:
    world = make_world(session)
    world.lab.team_size = size
    session.commit()
    return world


def _team_url(world: World) -> str:
    return f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/team"


async def _start(client: httpx.AsyncClient, world: World, who: Member, name: str) -> None:
    r = await client.post(_team_url(world), headers=who.auth, json={"name": name})
    assert r.status_code == 201, r.text


async def _invite(client: httpx.AsyncClient, world: World, by: Member, guest: Member) -> int:
    r = await client.post(
        f"{_team_url(world)}/invites", headers=by.auth, json={"email": guest.email}
    )
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


async def _answer(
    client: httpx.AsyncClient, world: World, who: Member, invite_id: int, accept: bool = True
) -> httpx.Response:
    return await client.post(
        f"{_team_url(world)}/invites/{invite_id}", headers=who.auth, json={"accept": accept}
    )


async def _mine(client: httpx.AsyncClient, world: World, who: Member) -> dict:
    r = await client.get(_team_url(world), headers=who.auth)
    assert r.status_code == 200, r.text
    return r.json()


async def test_only_the_invited_student_answers_an_invitation(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = teamed_world(session, size=3)
    third = make_member(session, world.course, Role.student)
    session.commit()
    await _start(client, world, world.student, "Warp")
    invite_id = await _invite(client, world, world.student, world.other_student)
    for stranger in (third, world.outsider):
        for accept in (True, False):
            r = await _answer(client, world, stranger, invite_id, accept)
            assert r.status_code in (403, 404), r.text
            if r.status_code == 404:
                assert f"no invitation {invite_id} for you" in r.json()["detail"]
    # Nothing changed: the stranger is in no team, the invitation still waits for its student.
    assert (await _mine(client, world, third))["team"] is None
    waiting = (await _mine(client, world, world.other_student))["invitations"]
    assert [i["id"] for i in waiting] == [invite_id]
    session.expire_all()
    row = session.get_one(TeamInvite, invite_id)
    assert (row.answered_at, row.accepted) == (None, None)
    # Its own student can still take it.
    r = await _answer(client, world, world.other_student, invite_id)
    assert r.status_code == 200, r.text
    assert sorted(r.json()["team"]["members"]) == sorted(
        [world.student.email, world.other_student.email]
    )
    # Answered once: a second answer, even by its student, is refused.
    again = await _answer(client, world, world.other_student, invite_id, accept=False)
    assert again.status_code == 409 and "answered already" in again.json()["detail"]


async def test_an_invitation_is_for_its_own_lab(
    client: httpx.AsyncClient, session: Session
) -> None:
    from app.courses.service import add_lab

    world = teamed_world(session)
    other_lab = add_lab(session, course=world.course, ref="vector-scale")
    other_lab.team_size = 2
    session.commit()
    await _start(client, world, world.student, "Here")
    invite_id = await _invite(client, world, world.student, world.other_student)
    there = f"/api/v1/courses/{world.course.slug}/labs/{other_lab.slug}/team"
    r = await client.post(
        f"{there}/invites/{invite_id}", headers=world.other_student.auth, json={"accept": True}
    )
    assert r.status_code == 404, r.text
    assert (await _mine(client, world, world.other_student))["team"] is None


async def _pair_with_two_invited(
    client: httpx.AsyncClient, session: Session
) -> tuple[World, Member, int, int]:
    """A team Pair of one (of at most two), and two students invited while one place is free:
    the world, the third student, and the two invitations (the other student's, the third's)."""
    world = teamed_world(session, size=2)
    third = make_member(session, world.course, Role.student)
    session.commit()
    await _start(client, world, world.student, "Pair")
    second = await _invite(client, world, world.student, world.other_student)
    late = await _invite(client, world, world.student, third)
    return world, third, second, late


async def test_a_full_team_takes_no_one_more_and_a_declined_invitation_adds_no_one(
    client: httpx.AsyncClient, session: Session
) -> None:
    world, third, second, late = await _pair_with_two_invited(client, session)
    declined = await _answer(client, world, third, late, accept=False)
    assert declined.status_code == 200 and declined.json()["team"] is None
    assert (await _answer(client, world, world.other_student, second)).status_code == 200
    # Full at its size exactly: the team has two, nobody else gets in by any door.
    r = await client.post(
        f"{_team_url(world)}/invites", headers=world.student.auth, json={"email": third.email}
    )
    assert r.status_code == 409 and "full" in r.json()["detail"]
    r = await client.put(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/teams/Pair",
        headers=world.ta.auth,
        json={"members": [world.student.email, world.other_student.email, third.email]},
    )
    assert r.status_code == 422 and "more than the 2" in r.json()["detail"]
    team = (await _mine(client, world, world.student))["team"]
    assert sorted(team["members"]) == sorted([world.student.email, world.other_student.email])
    assert team["size_limit"] == 2


async def test_a_student_who_left_starts_or_joins_another_team(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = teamed_world(session, size=2)
    third = make_member(session, world.course, Role.student)
    session.commit()
    await _start(client, world, world.student, "First")
    invite_id = await _invite(client, world, world.student, world.other_student)
    assert (await _answer(client, world, world.other_student, invite_id)).status_code == 200
    # In a team: no second one.
    r = await client.post(_team_url(world), headers=world.other_student.auth, json={"name": "Two"})
    assert r.status_code == 409 and "already in the team First" in r.json()["detail"]
    left = await client.delete(_team_url(world), headers=world.other_student.auth)
    assert left.status_code == 204
    assert (await _mine(client, world, world.other_student))["team"] is None
    # Left: free to start another team, and the first team has a free place again.
    await _start(client, world, world.other_student, "Second")
    assert (await _mine(client, world, world.other_student))["team"]["name"] == "Second"
    assert (await _mine(client, world, world.student))["team"]["members"] == [world.student.email]
    # The first team's founder leaves too, and joins the second team by invitation.
    assert (await client.delete(_team_url(world), headers=world.student.auth)).status_code == 204
    again = await _invite(client, world, world.other_student, world.student)
    joined = await _answer(client, world, world.student, again)
    assert joined.status_code == 200, joined.text
    assert joined.json()["team"]["name"] == "Second"
    # Leaving twice is a sentence: a student not in a team has nothing to leave.
    await _start(client, world, third, "Third")
    assert (await client.delete(_team_url(world), headers=third.auth)).status_code == 204
    gone = await client.delete(_team_url(world), headers=third.auth)
    assert gone.status_code == 404 and "not in a team" in gone.json()["detail"]
    # Every stretch is kept: the other student was in First, then is in Second.
    session.expire_all()
    stretches = session.scalars(
        select(TeamMember)
        .where(TeamMember.user_id == world.other_student.user.id)
        .order_by(TeamMember.id)
    ).all()
    assert [s.left_at is None for s in stretches] == [False, True]


async def _upload(client: httpx.AsyncClient, world: World, who: Member) -> int:
    r = await client.post(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/submissions",
        headers=who.auth,
        files={"file": ("scale.cu", GOOD_KERNEL.encode(), "text/plain")},
    )
    assert r.status_code == 202, r.text
    return int(r.json()["id"])


async def test_a_team_score_reaches_its_own_members_only(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = teamed_world(session, size=2)
    carol = make_member(session, world.course, Role.student)
    dave = make_member(session, world.course, Role.student)
    loner = make_member(session, world.course, Role.student)
    session.commit()
    base = f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/teams"
    for name, pair in (("Red", (world.student, world.other_student)), ("Blue", (carol, dave))):
        r = await client.put(
            f"{base}/{name}", headers=world.ta.auth, json={"members": [m.email for m in pair]}
        )
        assert r.status_code == 200, r.text
    red = await _upload(client, world, world.student)
    blue = await _upload(client, world, dave)
    alone = await _upload(client, world, loner)
    for sid, score in ((red, 8.0), (blue, 3.0), (alone, 5.0)):
        sub = session.get_one(Submission, sid)
        sub.score, sub.graded_at, sub.status = score, utcnow(), "graded"
    session.commit()
    book = {
        line.split(",")[2]: line.split(",")[3]
        for line in gradebook_csv(session, course=world.course).splitlines()[1:]
    }
    assert book[world.student.email] == book[world.other_student.email] == "8"
    assert book[carol.email] == book[dave.email] == "3"
    assert book[loner.email] == "5"
    # Each member's list holds their own team's submission, and no other team's.
    listed = {}
    for member in (world.student, world.other_student, carol, dave, loner):
        r = await client.get(
            f"/api/v1/courses/{world.course.slug}/submissions",
            headers=world.ta.auth,
            params={"user": member.email},
        )
        assert r.status_code == 200, r.text
        listed[member.email] = [s["id"] for s in r.json()]
    assert listed[world.student.email] == listed[world.other_student.email] == [red]
    assert listed[carol.email] == listed[dave.email] == [blue]
    assert listed[loner.email] == [alone]
    for member, foreign in ((carol, red), (world.other_student, blue), (loner, red)):
        r = await client.get(f"/api/v1/submissions/{foreign}", headers=member.auth)
        assert r.status_code == 404, (member.email, foreign)


async def test_a_team_that_fills_up_closes_its_other_invitations_and_says_so(
    client: httpx.AsyncClient,
    session: Session,
    mail_server: Inbox,  # noqa: F811
) -> None:
    """Issue 36, item 9: an invitation to a full team stayed pending, acceptable by nobody. Now
    the team's filling (by an accepted invitation, or the staff's smaller size) closes it, its
    student is told (the answer's sentence, the lab's pages, and mail where mail is set up)."""
    world, third, second, late = await _pair_with_two_invited(client, session)
    outbox.wait_until_sent()
    (mail,) = mail_server.to(third.email)
    assert "Pair" in body_of(mail) and f"/labs/{world.lab.slug}/teams" in body_of(mail)
    assert world.student.email in mail["Subject"]
    assert (await _answer(client, world, world.other_student, second)).status_code == 200
    # Full: the third student's invitation waits no more.
    assert (await _mine(client, world, third))["invitations"] == []
    session.expire_all()
    row = session.get_one(TeamInvite, late)
    assert row.answered_at is not None and row.accepted is None
    r = await _answer(client, world, third, late)
    assert r.status_code == 409
    assert r.json()["detail"] == (
        "The team Pair filled up before you answered, so its invitation is closed."
    )
    outbox.wait_until_sent()
    invited, closed = mail_server.to(third.email)
    assert "is full" in closed["Subject"] and "closed" in body_of(closed)
    # The staff list no open invitation for the full team.
    listed = await client.get(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/teams", headers=world.ta.auth
    )
    assert {t["name"]: t["invited"] for t in listed.json()} == {"Pair": []}


async def test_a_smaller_team_size_closes_the_invitations_of_teams_it_fills(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = teamed_world(session, size=3)
    third, fourth = (make_member(session, world.course, Role.student) for _ in range(2))
    session.commit()
    await _start(client, world, world.student, "Trio")
    await _start(client, world, fourth, "Solo")
    joined = await _invite(client, world, world.student, world.other_student)
    assert (await _answer(client, world, world.other_student, joined)).status_code == 200
    to_trio = await _invite(client, world, world.student, third)
    to_solo = await _invite(client, world, fourth, third)
    r = await client.patch(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}",
        headers=world.instructor.auth,
        json={"team_size": 2},
    )
    assert r.status_code == 200, r.text
    # Trio has two members, full at 2: closed. Solo has one: still open.
    assert [i["id"] for i in (await _mine(client, world, third))["invitations"]] == [to_solo]
    session.expire_all()
    assert session.get_one(TeamInvite, to_trio).accepted is None
    assert session.get_one(TeamInvite, to_trio).answered_at is not None
    assert session.get_one(TeamInvite, to_solo).answered_at is None
