"""Who may open which page and send which form, for late days, teams, regrade requests, rubric
points and similarity: each logged in as a student, a TA, an instructor, someone enrolled
nowhere, and another course's instructor. Refused exactly where the role falls short (403, or
the page's sentence where the form says why, or 404 where the thing is not theirs to know of),
and never where it does not."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest
from sqlalchemy.orm import Session

from tests.app.api.test_permissions import course_of_five
from tests.app.web.test_routes import csrf_of, login

pytestmark = pytest.mark.anyio

MEMBERS = ("student", "ta", "instructor")
STAFF = ("ta", "instructor")
INSTRUCTOR = ("instructor",)
EVERYONE = ("student", "ta", "instructor", "outsider", "elsewhere")


@dataclass(frozen=True)
class Page:
    path: str  # with {course}, {lab}, {student}, {item}, {report}, {request}
    allowed: tuple[str, ...]
    form: Callable[[dict[str, str]], dict[str, str]] | None = None  # a POST with these fields
    # What each refused role gets, where it is not 403.
    refused: tuple[tuple[str, int], ...] = ()


PAGES = [
    Page("/courses/{course}/late-days", MEMBERS),
    Page(
        "/courses/{course}/late-days",
        STAFF,
        lambda n: {"action": "adjust", "email": n["student"], "days": "1", "reason": "ill"},
    ),
    Page(
        "/courses/{course}/late-days",
        INSTRUCTOR,
        lambda n: {"action": "budget", "days": "3", "cap": "", "regrade_window": "7"},
    ),
    Page("/courses/{course}/labs/{lab}/teams", MEMBERS),
    Page(
        "/courses/{course}/labs/{lab}/teams",
        STAFF,
        lambda n: {"action": "form", "name": "Blue", "members": n["student"]},
        refused=(("student", 422),),
    ),
    Page(
        "/courses/{course}/labs/{lab}/settings",
        INSTRUCTOR,
        lambda n: {"team_size": "2", "late_penalty": "0"},
    ),
    Page("/courses/{course}/labs/{lab}/regrade-requests", STAFF),
    Page("/regrade-requests/{request}", MEMBERS, refused=(("outsider", 404), ("elsewhere", 404))),
    Page(
        "/regrade-requests/{request}",
        STAFF,
        lambda n: {"action": "decline", "answer": "It stands."},
        refused=(("student", 403), ("outsider", 404), ("elsewhere", 404)),
    ),
    Page("/courses/{course}/labs/{lab}/rubric", STAFF),
    Page(
        "/courses/{course}/labs/{lab}/rubric",
        INSTRUCTOR,
        lambda n: {"action": "item", "title": "Extra", "max_points": "1"},
        refused=(("ta", 422),),
    ),
    Page(
        "/courses/{course}/labs/{lab}/rubric",
        STAFF,
        lambda n: {"action": "grade", "email": n["student"], f"points_{n['item']}": "1"},
    ),
    Page("/courses/{course}/labs/{lab}/similarity", STAFF),
    Page("/courses/{course}/labs/{lab}/similarity", STAFF, lambda n: {}),
    Page("/similarity/{report}/pairs/1", STAFF),
    Page(
        "/courses/{course}/earlier-offerings",
        STAFF,
        lambda n: {"action": "unlink", "other": n["elsewhere"], "back": n["lab"]},
    ),
    Page(
        "/courses/{course}/earlier-offerings",
        (),
        lambda n: {"action": "link", "other": n["elsewhere"], "back": n["lab"]},
    ),
]


@pytest.mark.parametrize(
    "page", PAGES, ids=lambda p: ("POST " if p.form else "GET ") + p.path + f" {p.allowed}"
)
async def test_each_page_refuses_exactly_the_roles_it_should(
    page: Page, client: httpx.AsyncClient, session: Session
) -> None:
    names, who = await course_of_five(client, session)
    path = page.path.format(**names)
    refused = dict(page.refused)
    for role in sorted(EVERYONE, key=lambda r: r in page.allowed):  # the refused first
        await login(client, who[role])
        if page.form is None:
            answer = await client.get(path)
        else:
            token = csrf_of((await client.get("/account")).text)
            answer = await client.post(path, data={"csrf_token": token, **page.form(names)})
        if role in page.allowed:
            # The first allowed form does what it says; a second may find it done (409).
            first = page.form is not None and role == page.allowed[0]
            assert (
                answer.status_code == 303 if first else answer.status_code in (200, 303, 404, 409)
            ), (role, answer.status_code, answer.text[:500])
        else:
            assert answer.status_code == refused.get(role, 403), (
                role,
                answer.status_code,
                answer.text[:500],
            )
