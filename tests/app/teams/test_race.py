"""Two invitations to a team's last place answered at once: one student gets it, the other
reads that the team is full. On SQLite (one writer at a time) and on PostgreSQL (a row lock on
the lab), where KERNELGRADER_TEST_POSTGRES_URL names a server (CI sets it; elsewhere skipped).

Both answers are made to reach the lab's turn at its teams together, after each read the team
as one member short (a barrier in front of the real lock), so the test fails whenever that turn
does not serialize them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

import app.teams.service as teams_service
from app.courses.models import Role
from app.teams.models import TeamInvite, TeamMember
from tests.app.conftest import make_member
from tests.app.scaled import BACKENDS, migrated_database
from tests.app.teams.test_invitations import _answer, _invite, _mine, _start, teamed_world

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module", params=BACKENDS)
def backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    folder: Path = tmp_path_factory.mktemp("teams-race")
    with migrated_database(request.param, folder):
        yield request.param


async def test_two_invitations_answered_at_once_fill_the_last_place_once(
    backend: str,
    client: httpx.AsyncClient,
    session: Session,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert session.get_bind().dialect.name == backend
    world = teamed_world(session, size=2)
    third = make_member(session, world.course, Role.student)
    session.commit()
    await _start(client, world, world.student, "Last Place")
    invites = {
        guest.email: await _invite(client, world, world.student, guest)
        for guest in (world.other_student, third)
    }
    barrier = threading.Barrier(2, timeout=60)
    real = teams_service._lock_lab_teams

    def meet_then_take_turn(s: Session, lab: object) -> None:
        barrier.wait()
        real(s, lab)  # type: ignore[arg-type]

    monkeypatch.setattr(teams_service, "_lock_lab_teams", meet_then_take_turn)
    answers = await asyncio.gather(
        _answer(client, world, world.other_student, invites[world.other_student.email]),
        _answer(client, world, third, invites[third.email]),
    )
    monkeypatch.undo()
    assert sorted(r.status_code for r in answers) == [200, 409], [r.text for r in answers]
    refused = next(r for r in answers if r.status_code == 409)
    assert "already has 2 members" in refused.json()["detail"]
    team = (await _mine(client, world, world.student))["team"]
    assert len(team["members"]) == 2 and world.student.email in team["members"]
    session.expire_all()
    current = session.scalars(
        select(TeamMember.user_id).where(
            TeamMember.lab_id == world.lab.id, TeamMember.left_at.is_(None)
        )
    ).all()
    assert len(current) == 2


async def test_an_invitation_accepted_while_its_student_starts_a_team_is_refused(
    backend: str,
    client: httpx.AsyncClient,
    session: Session,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The answer reads the invitation still open, then waits for the lab's turn while the
    student's own team is made; in its turn it finds them in that team."""
    world = teamed_world(session, size=2)
    session.commit()
    await _start(client, world, world.student, "Inviting")
    invite_id = await _invite(client, world, world.student, world.other_student)
    read, started = threading.Event(), threading.Event()
    real = teams_service._lock_lab_teams

    def answer_waits_for_the_start(s: Session, lab: object) -> None:
        if any(isinstance(row, TeamInvite) for row in s.identity_map.values()):
            read.set()  # the answer has read its invitation, still open
            assert started.wait(60), "the team was not started"
        else:
            assert read.wait(60), "the answer did not read its invitation"
        real(s, lab)  # type: ignore[arg-type]

    monkeypatch.setattr(teams_service, "_lock_lab_teams", answer_waits_for_the_start)

    async def start_then_let_the_answer_go() -> None:
        await _start(client, world, world.other_student, "Own")
        started.set()

    _, answer = await asyncio.gather(
        start_then_let_the_answer_go(), _answer(client, world, world.other_student, invite_id)
    )
    monkeypatch.undo()
    assert answer.status_code == 409, answer.text
    assert answer.json()["detail"] == (
        f"{world.other_student.email} is already in the team Own for {world.lab.slug}; they "
        "leave it first (or the staff move them)."
    )
    assert (await _mine(client, world, world.other_student))["team"]["name"] == "Own"
