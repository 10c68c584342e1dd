"""What staff and students read when a team change cannot be made, word for word, and what a
change records: a team's size (1 to 20), a staff team's members set exactly, a roster's lines,
an invitation sent twice or to a student in another team, and who did what and when."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.courses.models import Role
from app.courses.service import add_lab
from app.teams.models import Team, TeamInvite, TeamMember
from tests.app.conftest import Member, make_member
from tests.app.teams.test_invitations import (
    _answer,
    _invite,
    _mine,
    _start,
    _team_url,
    teamed_world,
)

pytestmark = pytest.mark.anyio


def _detail(r: httpx.Response, code: int) -> str:
    assert r.status_code == code, r.text
    return str(r.json()["detail"])


async def test_a_teams_size_is_1_to_20_and_each_change_says_what_it_did(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = teamed_world(session, size=1)
    url = f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}"

    async def size(n: int) -> httpx.Response:
        return await client.patch(url, headers=world.instructor.auth, json={"team_size": n})

    for bad in (0, 21):
        assert _detail(await size(bad), 422) == (
            f"A team holds 1 to 20 students (1: everyone submits alone); {bad} is outside that."
        )
    r = await size(20)
    assert r.status_code == 200 and r.json()["changes"] == ["is done in teams of up to 20"]
    assert r.json()["team_size"] == 20
    r = await size(2)
    assert r.json()["changes"] == ["is done in teams of up to 2"]
    assert (await size(2)).json()["changes"] == []  # the same size: nothing to say
    r = await size(1)
    assert r.json()["changes"] == ["is done alone"] and r.json()["team_size"] == 1
    # Alone, a lab takes no teams, whoever asks.
    said = _detail(
        await client.post(_team_url(world), headers=world.student.auth, json={"name": "Solo"}),
        422,
    )
    assert said == (
        f"{world.lab.slug} is done alone; an instructor sets a team size first "
        f"(`kernelgrader lab update COURSE {world.lab.slug} --team-size 2`)."
    )


async def test_staff_set_a_teams_members_exactly(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = teamed_world(session, size=2)
    third = make_member(session, world.course, Role.student)
    session.commit()
    url = f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/teams"

    async def put(name: str, *members: Member | str) -> httpx.Response:
        emails = [m if isinstance(m, str) else m.email for m in members]
        return await client.put(f"{url}/{name}", headers=world.ta.auth, json={"members": emails})

    assert _detail(await put("Alpha"), 422) == "Name at least one student for the team."
    assert _detail(await put("Alpha", " "), 422) == "Name at least one student for the team."
    assert _detail(await put("Alpha", world.student, world.student), 422) == (
        "A student is named twice; name each member once."
    )
    assert _detail(await put("Alpha", world.student, world.other_student, third), 422) == (
        f"3 students are more than the 2 a team of {world.lab.slug} may hold."
    )
    r = await put("Alpha", world.student, world.other_student)
    assert sorted(r.json()["members"]) == sorted([world.student.email, world.other_student.email])
    # Set again without the other student: they leave, the third joins; nobody else moves.
    r = await put("Alpha", world.student, third)
    assert sorted(r.json()["members"]) == sorted([world.student.email, third.email])
    assert (await _mine(client, world, world.other_student))["team"] is None
    # A student of another team is moved, and their old team keeps the rest.
    await put("Beta", world.other_student)
    r = await put("Beta", world.other_student, third)
    assert sorted(r.json()["members"]) == sorted([world.other_student.email, third.email])
    listed = {
        t["name"]: t["members"] for t in (await client.get(url, headers=world.ta.auth)).json()
    }
    assert listed == {
        "Alpha": [world.student.email],
        "Beta": sorted([world.other_student.email, third.email]),
    }
    # Taking a student out of a team they are not in is a sentence.
    r = await client.delete(f"{url}/Alpha/members/{third.email}", headers=world.ta.auth)
    assert _detail(r, 404) == f"{third.email} is not in the team Alpha of {world.lab.slug}."


async def test_a_roster_says_which_line_is_wrong_and_why(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = teamed_world(session, size=2)
    third = make_member(session, world.course, Role.student)
    session.commit()
    url = f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/teams/import"
    a, b, c = world.student.email, world.other_student.email, third.email

    async def roster(text: str) -> httpx.Response:
        return await client.post(url, headers=world.ta.auth, json={"roster": text})

    columns = "The team roster needs the columns team and email (a line per member)."
    assert _detail(await roster(f"name,email\nAlpha,{a}\n"), 422) == columns
    assert _detail(await roster(f"team,mail\nAlpha,{a}\n"), 422) == columns
    assert _detail(await roster("team,email\n"), 422) == (
        "The team roster has no lines; add a line per member (team,email)."
    )
    both = "give both a team and an email."
    assert (
        _detail(await roster(f"team,email\nAlpha,{a}\nAlpha\n"), 422)
        == f"Team roster line 3: {both}"
    )
    assert _detail(await roster(f"team,email\n,{a}\n"), 422) == f"Team roster line 2: {both}"
    assert _detail(await roster(f"team,email\nAlpha,{a}\nBeta,{a}\n"), 422) == (
        f"Team roster line 3: {a} is already in a team on line 2; a student is in one team."
    )
    assert (await client.get(url.rsplit("/", 1)[0], headers=world.ta.auth)).json() == []
    # Blank lines are skipped, and the lines after them read; columns in any case and order.
    r = await roster(f"Email, TEAM\n{a},Alpha\n,\n\n{b},Alpha\n{c},Beta\n")
    assert r.status_code == 200, r.text
    assert {t["name"]: sorted(t["members"]) for t in r.json()} == {
        "Alpha": sorted([a, b]),
        "Beta": [c],
    }
    # A second roster moves a student between teams.
    r = await roster(f"team,email\nAlpha,{a}\nBeta,{b}\nBeta,{c}\n")
    assert r.status_code == 200, r.text
    listed = {
        t["name"]: t["members"]
        for t in (await client.get(url.rsplit("/", 1)[0], headers=world.ta.auth)).json()
    }
    assert listed == {"Alpha": [a], "Beta": sorted([b, c])}


async def test_what_a_student_reads_when_an_invitation_cannot_be(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = teamed_world(session, size=3)
    third = make_member(session, world.course, Role.student)
    session.commit()
    base = _team_url(world)
    r = await client.post(
        f"{base}/invites", headers=world.student.auth, json={"email": third.email}
    )
    assert _detail(r, 409) == "Start a team first; then invite others to it."
    r = await client.post(base, headers=world.ta.auth, json={"name": "Staff"})
    assert _detail(r, 403) == "Teams are for students; staff form them on the lab's teams page."
    await _start(client, world, world.student, "Red")
    await _start(client, world, third, "Blue")
    r = await client.post(_team_url(world), headers=world.student.auth, json={"name": "Green"})
    assert _detail(r, 409) == "You are already in the team Red; leave it first."
    r = await client.post(
        f"{base}/invites", headers=world.student.auth, json={"email": world.student.email}
    )
    assert _detail(r, 422) == "You are in the team already; invite someone else."
    r = await client.post(
        f"{base}/invites", headers=world.student.auth, json={"email": third.email}
    )
    assert _detail(r, 409) == f"{third.email} is already in a team for {world.lab.slug}."
    # Invited twice by one team: one invitation; by another team: another.
    first = await _invite(client, world, world.student, world.other_student)
    assert await _invite(client, world, world.student, world.other_student) == first
    other = await _invite(client, world, third, world.other_student)
    assert other != first
    r = await _answer(client, world, world.other_student, 10**12)
    assert _detail(r, 404) == f"There is no invitation {10**12} for you in {world.lab.slug}."
    # Accepting one invitation answers the other: it is no longer waiting.
    assert (await _answer(client, world, world.other_student, first)).status_code == 200
    assert (await _mine(client, world, world.other_student))["invitations"] == []
    r = await _answer(client, world, world.other_student, other)
    assert _detail(r, 409) == "That invitation was answered already."


async def test_a_students_invitations_are_theirs_for_this_lab_oldest_first(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = teamed_world(session, size=3)
    other_lab = add_lab(session, course=world.course, ref="vector-scale")
    other_lab.team_size = 2
    carol = make_member(session, world.course, Role.student)
    dave = make_member(session, world.course, Role.student)
    session.commit()
    await _start(client, world, world.student, "Red")
    await _start(client, world, carol, "Blue")
    red = await _invite(client, world, world.student, world.other_student)
    blue = await _invite(client, world, carol, world.other_student)
    await _invite(client, world, world.student, dave)  # someone else's
    there = f"/api/v1/courses/{world.course.slug}/labs/{other_lab.slug}/team"
    r = await client.post(there, headers=world.student.auth, json={"name": "Elsewhere"})
    assert r.status_code == 201, r.text
    r = await client.post(
        f"{there}/invites", headers=world.student.auth, json={"email": world.other_student.email}
    )
    assert r.status_code == 201, r.text
    mine = (await _mine(client, world, world.other_student))["invitations"]
    assert [(i["id"], i["team"]) for i in mine] == [(red, "Red"), (blue, "Blue")]
    assert {i["invited"] for i in mine} == {world.other_student.email}
    # Declined: no longer waiting; the staff's list shows each team's open invitations.
    assert (await _answer(client, world, world.other_student, red, accept=False)).json()[
        "team"
    ] is None
    mine = (await _mine(client, world, world.other_student))["invitations"]
    assert [i["id"] for i in mine] == [blue]
    listed = await client.get(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/teams", headers=world.ta.auth
    )
    assert {t["name"]: t["invited"] for t in listed.json()} == {
        "Blue": [world.other_student.email],
        "Red": [dave.email],
    }


async def test_leaving_one_labs_team_keeps_the_others(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = teamed_world(session, size=2)
    other_lab = add_lab(session, course=world.course, ref="vector-scale")
    other_lab.team_size = 2
    session.commit()
    there = f"/api/v1/courses/{world.course.slug}/labs/{other_lab.slug}/team"
    # The other lab's team first: its membership is the older row.
    assert (
        await client.post(there, headers=world.student.auth, json={"name": "There"})
    ).status_code == 201
    await _start(client, world, world.student, "Here")
    assert (await client.delete(_team_url(world), headers=world.student.auth)).status_code == 204
    assert (await _mine(client, world, world.student))["team"] is None
    kept = (await client.get(there, headers=world.student.auth)).json()["team"]
    assert kept is not None and kept["name"] == "There"


async def test_who_made_each_change_and_when_is_recorded(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = teamed_world(session, size=3)
    third = make_member(session, world.course, Role.student)
    session.commit()
    await _start(client, world, world.student, "Kept")
    invite_id = await _invite(client, world, world.student, world.other_student)
    assert (await _answer(client, world, world.other_student, invite_id)).status_code == 200
    r = await client.put(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/teams/Staffed",
        headers=world.ta.auth,
        json={"members": [third.email]},
    )
    assert r.status_code == 200
    session.expire_all()
    teams = {t.name: t for t in session.scalars(select(Team).where(Team.lab_id == world.lab.id))}
    assert teams["Kept"].created_by_id == world.student.user.id
    assert teams["Staffed"].created_by_id == world.ta.user.id
    rows = {
        m.user_id: m
        for m in session.scalars(select(TeamMember).where(TeamMember.lab_id == world.lab.id))
    }
    assert rows[world.student.user.id].added_by_id == world.student.user.id
    assert rows[world.other_student.user.id].added_by_id is None  # joined by their own answer
    assert rows[third.user.id].added_by_id == world.ta.user.id
    invite = session.get_one(TeamInvite, invite_id)
    assert invite.invited_by_id == world.student.user.id
    assert invite.answered_at is not None and invite.accepted is True
    assert invite.created_at <= invite.answered_at
    assert rows[world.other_student.user.id].joined_at == invite.answered_at


async def test_team_names_are_tidied_bounded_and_one_per_lab(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = teamed_world(session, size=2)
    other_lab = add_lab(session, course=world.course, ref="vector-scale")
    other_lab.team_size = 2
    carol = make_member(session, world.course, Role.student)
    session.commit()
    bad = "A team name is 1 to 60 letters, digits, spaces and . ' & + - characters; choose another."
    for name in ("Team <b>", "x" * 61, "-dash first"):
        r = await client.post(_team_url(world), headers=world.student.auth, json={"name": name})
        assert _detail(r, 422) == bad, name
    r = await client.post(_team_url(world), headers=world.student.auth, json={"name": "x" * 60})
    assert r.status_code == 201, r.text
    r = await client.post(_team_url(world), headers=carol.auth, json={"name": "  Warp \n  Nine  "})
    assert r.status_code == 201 and r.json()["team"]["name"] == "Warp Nine"
    r = await client.post(
        _team_url(world), headers=world.other_student.auth, json={"name": "Warp Nine"}
    )
    assert _detail(r, 409) == (
        f"{world.lab.slug} already has a team called Warp Nine; choose another name."
    )
    # The same name in another lab is that lab's own.
    there = f"/api/v1/courses/{world.course.slug}/labs/{other_lab.slug}/team"
    r = await client.post(there, headers=world.other_student.auth, json={"name": "Warp Nine"})
    assert r.status_code == 201, r.text


async def test_teams_are_listed_by_name_and_members_by_email(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = teamed_world(session, size=3)
    zed = make_member(session, world.course, Role.student)
    session.commit()
    # Zed joined the course last but sorts first.
    zed.user.email, world.student.user.email = "aa-" + zed.email, "zz-" + world.student.email
    session.commit()
    url = f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/teams"
    # Made in the other order than they are listed, members named in the order they joined.
    for name, members in (
        ("Zulu", [world.other_student.email]),
        ("Alpha", [world.student.email, zed.email]),
    ):
        r = await client.put(f"{url}/{name}", headers=world.ta.auth, json={"members": members})
        assert r.status_code == 200, r.text
    # Zulu invites two, the later-sorting one first.
    late, early = (make_member(session, world.course, Role.student) for _ in range(2))
    late.user.email, early.user.email = "zz-" + late.email, "aa-" + early.email
    session.commit()
    for guest in (late, early):
        await _invite(client, world, world.other_student, guest)
    listed = (await client.get(url, headers=world.ta.auth)).json()
    assert [t["name"] for t in listed] == ["Alpha", "Zulu"]
    assert listed[0]["members"] == [zed.email, world.student.email]
    assert listed[1]["invited"] == [early.email, late.email]
    # A staff member or someone outside the course is no one's teammate.
    for outsider, sentence in (
        (
            world.outsider.email,
            f"{world.outsider.email} is not enrolled in {world.course.slug}; only the course's "
            "students can be in a team. Enrol them first, or correct the address.",
        ),
        (
            world.ta.email,
            f"{world.ta.email} is on the staff of {world.course.slug}; teams are for students.",
        ),
    ):
        r = await client.put(f"{url}/Zulu", headers=world.ta.auth, json={"members": [outsider]})
        assert _detail(r, 422) == sentence


async def test_joining_a_team_answers_the_students_own_open_invitations_of_this_lab_only(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = teamed_world(session, size=3)
    other_lab = add_lab(session, course=world.course, ref="vector-scale")
    other_lab.team_size = 2
    carol, dave, erin = (make_member(session, world.course, Role.student) for _ in range(3))
    session.commit()
    there = f"/api/v1/courses/{world.course.slug}/labs/{other_lab.slug}/team"
    await _start(client, world, world.student, "Red")
    await _start(client, world, carol, "Blue")
    # The other student declines Blue once; then is invited by Red, by Blue again, and in the
    # other lab; Dave is invited by Red too.
    declined = await _invite(client, world, carol, world.other_student)
    assert (await _answer(client, world, world.other_student, declined, accept=False)).json()[
        "team"
    ] is None
    red = await _invite(client, world, world.student, world.other_student)
    blue = await _invite(client, world, carol, world.other_student)
    assert blue != declined  # a new invitation, not the declined one
    dave_red = await _invite(client, world, world.student, dave)
    assert (
        await client.post(there, headers=erin.auth, json={"name": "Elsewhere"})
    ).status_code == 201
    r = await client.post(
        f"{there}/invites", headers=erin.auth, json={"email": world.other_student.email}
    )
    elsewhere = r.json()["id"]
    # Put in Blue by the staff: Red's and Blue's invitations are answered (Blue's as taken).
    r = await client.put(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/teams/Blue",
        headers=world.ta.auth,
        json={"members": [carol.email, world.other_student.email]},
    )
    assert r.status_code == 200, r.text
    assert (await _mine(client, world, world.other_student))["invitations"] == []
    assert [i["id"] for i in (await _mine(client, world, dave))["invitations"]] == [dave_red]
    lab_two = await client.get(there, headers=world.other_student.auth)
    assert [i["id"] for i in lab_two.json()["invitations"]] == [elsewhere]
    session.expire_all()
    rows = {i: session.get_one(TeamInvite, i) for i in (declined, red, blue, dave_red, elsewhere)}
    assert (rows[declined].accepted, rows[red].accepted, rows[blue].accepted) == (
        False,
        False,
        True,
    )
    assert rows[declined].answered_at < rows[red].answered_at == rows[blue].answered_at
    assert rows[dave_red].answered_at is None and rows[elsewhere].answered_at is None
    # Dave starts a team of his own: his invitation is answered, not taken.
    await _start(client, world, dave, "Green")
    assert (await _mine(client, world, dave))["invitations"] == []
    session.expire_all()
    dave_row = session.get_one(TeamInvite, dave_red)
    assert dave_row.answered_at is not None and dave_row.accepted is False
    # A roster's teams are made by whoever sent it.
    r = await client.post(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/teams/import",
        headers=world.instructor.auth,
        json={"roster": f"team,email\nRostered,{erin.email}\n"},
    )
    assert r.status_code == 200, r.text
    session.expire_all()
    made = session.scalars(
        select(Team).where(Team.lab_id == world.lab.id, Team.name == "Rostered")
    ).one()
    assert made.created_by_id == world.instructor.user.id
    member = session.scalars(
        select(TeamMember).where(TeamMember.team_id == made.id, TeamMember.left_at.is_(None))
    ).one()
    assert member.added_by_id == world.instructor.user.id
