"""Teams: formed by staff or by students, a submission credited to every member of its moment
(gradebook rows in both CSV formats), honest history, one quota and one leaderboard place."""

from __future__ import annotations

import csv
import io

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.errors import Invalid
from app.courses.models import Role
from app.gradebook.service import canvas_csv, gradebook_csv
from app.performance.leaderboard import join_leaderboard, leaderboard
from app.teams.models import SubmissionCredit, Team, TeamMember
from app.teams.service import form_team, import_teams, remove_member, teams_of
from tests.app.conftest import GOOD_KERNEL, World, make_member, make_world
from tests.app.factories import make_timed_submission

pytestmark = pytest.mark.anyio


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def teamed_world(session: Session, size: int = 3) -> World:
    world = make_world(session)
    world.lab.team_size = size
    session.commit()
    return world


async def upload(client: httpx.AsyncClient, world: World, auth: dict[str, str]) -> int:
    r = await client.post(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/submissions",
        headers=auth,
        files={"file": ("scale.cu", GOOD_KERNEL.encode(), "text/plain")},
    )
    assert r.status_code == 202, r.text
    return int(r.json()["id"])


async def test_a_team_submission_counts_for_every_member_in_both_csv_formats(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = teamed_world(session)
    third = make_member(session, world.course, Role.student)
    session.commit()
    r = await client.put(
        f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/teams/Warp Nine",
        headers=world.ta.auth,
        json={"members": [world.student.email, world.other_student.email]},
    )
    assert r.status_code == 200, r.text
    assert sorted(r.json()["members"]) == sorted([world.student.email, world.other_student.email])
    sid = await upload(client, world, world.student.auth)
    # Graded as a worker would: the score lands on the one submission.
    from app.submissions.models import Submission

    sub = session.get_one(Submission, sid)
    sub.score, sub.graded_at, sub.status = 8.0, utcnow(), "graded"
    session.commit()
    credited = session.scalars(
        select(SubmissionCredit.user_id).where(SubmissionCredit.submission_id == sid)
    ).all()
    assert credited == [world.other_student.user.id]

    book = {row[2]: row for row in _rows(gradebook_csv(session, course=world.course))[1:]}
    assert book[world.student.email][3] == "8"
    assert book[world.other_student.email][3] == "8"  # credited, not the author
    assert book[third.email][3] == ""  # not in the team
    canvas = {row[3]: row for row in _rows(canvas_csv(session, course=world.course))[2:]}
    assert canvas[world.student.email][5] == "8"
    assert canvas[world.other_student.email][5] == "8"
    assert canvas[third.email][5] == ""
    # The teammate sees it as their own, through the API and in their list.
    seen = await client.get(f"/api/v1/submissions/{sid}", headers=world.other_student.auth)
    assert seen.status_code == 200
    hidden = await client.get(f"/api/v1/submissions/{sid}", headers=third.auth)
    assert hidden.status_code == 404


async def test_history_stays_with_who_was_in_the_team_when_it_was_submitted(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = teamed_world(session)
    late_joiner = make_member(session, world.course, Role.student)
    session.commit()
    world.pair_up(session, now=utcnow(), name="Alpha")
    session.commit()
    first = await upload(client, world, world.student.auth)
    # The teammate leaves; a newcomer joins; then another submission.
    remove_member(session, lab=world.lab, user=world.other_student.user, now=utcnow())
    form_team(
        session,
        course=world.course,
        lab=world.lab,
        name="Alpha",
        emails=[world.student.email, late_joiner.email],
        by=None,
        now=utcnow(),
    )
    session.commit()
    second = await upload(client, world, world.student.auth)
    credits = {
        sid: set(
            session.scalars(
                select(SubmissionCredit.user_id).where(SubmissionCredit.submission_id == sid)
            )
        )
        for sid in (first, second)
    }
    assert credits[first] == {world.other_student.user.id}
    assert credits[second] == {late_joiner.user.id}
    # The stretches are kept: the leaver's membership has an end, nothing was deleted.
    stretches = session.scalars(
        select(TeamMember).where(TeamMember.user_id == world.other_student.user.id)
    ).all()
    assert len(stretches) == 1 and stretches[0].left_at is not None


def test_a_roster_with_a_non_member_changes_nothing(session: Session) -> None:
    world = teamed_world(session)
    outsider = world.outsider.email
    roster = (
        "team,email\n"
        f"Alpha,{world.student.email}\n"
        f"Beta,{world.other_student.email}\n"
        f"Beta,{outsider}\n"
    )
    with pytest.raises(Invalid) as caught:
        import_teams(
            session, course=world.course, lab=world.lab, text=roster, by=None, now=utcnow()
        )
    assert f"line 4: {outsider} is not enrolled in {world.course.slug}" in caught.value.message
    session.rollback()
    assert teams_of(session, lab=world.lab) == []
    assert session.scalars(select(Team).where(Team.lab_id == world.lab.id)).all() == []


def test_a_roster_sets_every_team_and_a_team_over_the_size_is_refused(session: Session) -> None:
    world = teamed_world(session, size=2)
    third = make_member(session, world.course, Role.student)
    session.commit()
    roster = f"team,email\nAlpha,{world.student.email}\nAlpha,{world.other_student.email}\n"
    import_teams(session, course=world.course, lab=world.lab, text=roster, by=None, now=utcnow())
    session.commit()
    assert [v.team.name for v in teams_of(session, lab=world.lab)] == ["Alpha"]
    too_big = roster + f"Alpha,{third.email}\n"
    with pytest.raises(Invalid, match="more than the 2"):
        import_teams(
            session, course=world.course, lab=world.lab, text=too_big, by=None, now=utcnow()
        )


async def test_students_start_invite_and_accept(
    client: httpx.AsyncClient, session: Session
) -> None:
    world = teamed_world(session, size=2)
    base = f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/team"
    r = await client.post(base, headers=world.student.auth, json={"name": "Coalesced"})
    assert r.status_code == 201, r.text
    r = await client.post(
        f"{base}/invites", headers=world.student.auth, json={"email": world.other_student.email}
    )
    assert r.status_code == 201, r.text
    invite_id = r.json()["id"]
    mine = (await client.get(base, headers=world.other_student.auth)).json()
    assert mine["team"] is None and [i["team"] for i in mine["invitations"]] == ["Coalesced"]
    r = await client.post(
        f"{base}/invites/{invite_id}", headers=world.other_student.auth, json={"accept": True}
    )
    assert r.status_code == 200, r.text
    assert sorted(r.json()["team"]["members"]) == sorted(
        [world.student.email, world.other_student.email]
    )
    # Full now: a third invitation is refused with a sentence.
    third = make_member(session, world.course, Role.student)
    session.commit()
    r = await client.post(
        f"{base}/invites", headers=world.student.auth, json={"email": third.email}
    )
    assert r.status_code == 409
    assert "full" in r.json()["detail"]
    # An outsider cannot be invited.
    r = await client.post(
        f"{base}/invites", headers=world.student.auth, json={"email": world.outsider.email}
    )
    assert r.status_code == 422
    assert "not enrolled" in r.json()["detail"]


async def test_a_team_shares_one_quota(
    client: httpx.AsyncClient, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.core.settings import get_settings

    world = teamed_world(session, size=2)
    world.pair_up(session, now=utcnow(), name="Q")
    session.commit()
    monkeypatch.setenv("KERNELGRADER_SUBMISSION_RATE_LIMIT", "2")
    get_settings.cache_clear()
    try:
        await upload(client, world, world.student.auth)
        await upload(client, world, world.other_student.auth)
        r = await client.post(
            f"/api/v1/courses/{world.course.slug}/labs/{world.lab.slug}/submissions",
            headers=world.student.auth,
            files={"file": ("scale.cu", GOOD_KERNEL.encode(), "text/plain")},
        )
        assert r.status_code == 429, r.text
    finally:
        monkeypatch.delenv("KERNELGRADER_SUBMISSION_RATE_LIMIT")
        get_settings.cache_clear()


def test_the_leaderboard_counts_a_team_once(session: Session) -> None:
    world = teamed_world(session, size=2)
    world.pair_up(session, now=utcnow(), name="Fast")
    session.flush()
    for member in (world.student, world.other_student):
        join_leaderboard(
            session,
            course=world.course,
            lab=world.lab,
            user=member.user,
            pseudonym=f"Name {member.user.id}",
        )
    for member, ms in ((world.student, 2.0), (world.other_student, 1.5)):
        sub = make_timed_submission(session, user=member.user, lab=world.lab, median_ms=ms)
        from app.submissions.credits import credit_submission

        credit_submission(session, submission=sub, lab=world.lab)
    session.commit()
    boards = leaderboard(session, lab=world.lab, viewer_id=world.other_student.user.id)
    assert len(boards) == 1
    (place,) = boards[0].places
    assert place.median_ms == 1.5 and place.is_you
    # Shown under the pseudonym of the member who opted in first.
    assert place.pseudonym == f"Name {world.student.user.id}"


async def test_work_done_alone_credits_nobody(client: httpx.AsyncClient, session: Session) -> None:
    world = teamed_world(session, size=2)
    world.pair_up(session, now=utcnow(), name="Duo")
    loner = make_member(session, world.course, Role.student)
    session.commit()
    # A student in no team, beside a team of the same lab.
    solo = await upload(client, world, loner.auth)
    # The lab is done alone from now on: a member's upload is theirs only.
    world.lab.team_size = 1
    session.commit()
    alone = await upload(client, world, world.student.auth)
    from app.submissions.models import Submission

    for sid in (solo, alone):
        sub = session.get_one(Submission, sid)
        sub.score, sub.graded_at, sub.status = 6.0, utcnow(), "graded"
        assert sub.team_id is None
    session.commit()
    assert (
        session.scalars(
            select(SubmissionCredit).where(SubmissionCredit.submission_id.in_([solo, alone]))
        ).all()
        == []
    )
    book = {row[2]: row for row in _rows(gradebook_csv(session, course=world.course))[1:]}
    assert book[loner.email][3] == book[world.student.email][3] == "6"
    assert book[world.other_student.email][3] == ""
