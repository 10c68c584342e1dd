"""Who may call what, for the API of late days, teams, regrade requests, rubric points and
similarity: every endpoint called by a student, a TA, an instructor, someone enrolled nowhere,
and another course's instructor. Refused with 403 exactly where the role falls short (or 404
where the thing is not theirs to know of), and never refused where it does not."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest
from sqlalchemy.orm import Session

from app.rubric.service import add_item
from app.similarity.models import SimilarityReport
from tests.app.conftest import Member, make_world
from tests.app.factories import make_submission

pytestmark = pytest.mark.anyio

MEMBERS = ("student", "ta", "instructor")
STAFF = ("ta", "instructor")
INSTRUCTOR = ("instructor",)
EVERYONE = ("student", "ta", "instructor", "outsider", "elsewhere")


@dataclass(frozen=True)
class Call:
    method: str
    path: str  # with {course}, {lab}, {student}, {item}, {report}, {request}
    allowed: tuple[str, ...]
    body: Callable[[dict[str, str]], dict] | None = None
    # What the others get: 403 (a role short) or 404 (not theirs to know of).
    refused: int = 403


CALLS = [
    Call("GET", "/courses/{course}/late-days/me", MEMBERS),
    Call("GET", "/courses/{course}/late-days", STAFF),
    Call("GET", "/courses/{course}/late-days/{student}", STAFF),
    Call(
        "POST",
        "/courses/{course}/late-days/{student}/adjustments",
        STAFF,
        lambda n: {"days": 1, "reason": "a documented absence"},
    ),
    Call("GET", "/courses/{course}/policies", MEMBERS),
    Call("PATCH", "/courses/{course}/policies", INSTRUCTOR, lambda n: {"regrade_window_days": 7}),
    Call("GET", "/courses/{course}/labs/{lab}/teams", STAFF),
    Call(
        "PUT",
        "/courses/{course}/labs/{lab}/teams/Blue",
        STAFF,
        lambda n: {"members": [n["student"]]},
    ),
    Call(
        "POST",
        "/courses/{course}/labs/{lab}/teams/import",
        STAFF,
        lambda n: {"roster": f"team,email\nBlue,{n['student']}\n"},
    ),
    Call("DELETE", "/courses/{course}/labs/{lab}/teams/Blue/members/{student}", STAFF),
    Call("GET", "/courses/{course}/labs/{lab}/team", MEMBERS),
    Call("DELETE", "/courses/{course}/labs/{lab}/team", MEMBERS),
    Call(
        "POST", "/courses/{course}/labs/{lab}/team/invites/1", MEMBERS, lambda n: {"accept": True}
    ),
    Call("GET", "/courses/{course}/labs/{lab}/regrade-requests", MEMBERS),
    Call("GET", "/regrade-requests/{request}", ("student", "ta", "instructor"), refused=404),
    Call(
        "POST",
        "/regrade-requests/{request}/answer",
        STAFF,
        lambda n: {"decision": "decline", "answer": "No change."},
    ),
    Call("GET", "/courses/{course}/labs/{lab}/rubric", MEMBERS),
    Call(
        "POST",
        "/courses/{course}/labs/{lab}/rubric/items",
        INSTRUCTOR,
        lambda n: {"title": "Another", "max_points": 1},
    ),
    Call(
        "POST",
        "/courses/{course}/labs/{lab}/rubric/items/{item}/comments",
        STAFF,
        lambda n: {"text": "Ok"},
    ),
    Call("DELETE", "/courses/{course}/labs/{lab}/rubric/items/999999999", INSTRUCTOR),
    Call(
        "PUT",
        "/courses/{course}/labs/{lab}/rubric/grades/{student}",
        STAFF,
        lambda n: {"scores": [{"item": int(n["item"]), "points": 1}]},
    ),
    Call("GET", "/courses/{course}/labs/{lab}/similarity", STAFF),
    Call("POST", "/courses/{course}/labs/{lab}/similarity", STAFF, lambda n: {}),
    Call("GET", "/similarity/{report}", STAFF),
    Call("GET", "/similarity/{report}/pairs/1", STAFF),
    Call("GET", "/courses/{course}/earlier-offerings", STAFF),
    Call("DELETE", "/courses/{course}/earlier-offerings/{elsewhere}", STAFF),
    # Only an instructor of both courses links one as the other's earlier offering: nobody here.
    Call("PUT", "/courses/{course}/earlier-offerings/{elsewhere}", ()),
]


async def course_of_five(
    client: httpx.AsyncClient, session: Session
) -> tuple[dict[str, str], dict[str, Member]]:
    """A course whose lab is done in teams, with a rubric item, a graded submission, a regrade
    request about it and a similarity report: the names a path is filled in with, and the five
    callers (a student, a TA, an instructor, someone enrolled nowhere, another course's
    instructor)."""
    world = make_world(session)
    elsewhere = make_world(session)
    world.lab.team_size = 2
    item = add_item(session, lab=world.lab, title="Report", max_points=2)
    sub, _ = make_submission(session, user=world.student.user, lab=world.lab, score=6)
    report = SimilarityReport(lab_id=world.lab.id, state="done")
    session.add(report)
    session.commit()
    r = await client.post(
        f"/api/v1/submissions/{sub.id}/regrade-requests",
        headers=world.student.auth,
        json={"text": "Please look again."},
    )
    assert r.status_code == 201, r.text
    names = {
        "course": world.course.slug,
        "lab": world.lab.slug,
        "student": world.student.email,
        "item": str(item.id),
        "report": str(report.id),
        "request": str(r.json()["id"]),
        "elsewhere": elsewhere.course.slug,
    }
    who: dict[str, Member] = {
        "student": world.student,
        "ta": world.ta,
        "instructor": world.instructor,
        "outsider": world.outsider,
        "elsewhere": elsewhere.instructor,
    }
    return names, who


@pytest.mark.parametrize("call", CALLS, ids=lambda c: f"{c.method} {c.path}")
async def test_each_endpoint_refuses_exactly_the_roles_it_should(
    call: Call, client: httpx.AsyncClient, session: Session
) -> None:
    names, who = await course_of_five(client, session)
    path = "/api/v1" + call.path.format(**names)
    body = call.body(names) if call.body is not None else None
    # The refused first, so nothing an allowed call changes decides their answer.
    order = sorted(EVERYONE, key=lambda role: role in call.allowed)
    for role in order:
        answer = await client.request(call.method, path, headers=who[role].auth, json=body)
        if role in call.allowed:
            assert answer.status_code not in (401, 403) and answer.status_code < 500, (
                role,
                answer.status_code,
                answer.text,
            )
        else:
            assert answer.status_code == call.refused, (role, answer.status_code, answer.text)
