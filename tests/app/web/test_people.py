"""Staff manage a course's people on the web: add and remove a student or TA, change a role,
(re)send a set-password link, and a roster CSV previewed before it is applied (issue 19,
item 8)."""

from __future__ import annotations

import re

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.mail import outbox
from app.courses.models import Enrollment, Role
from app.courses.service import role_in
from app.users.service import find_user
from tests.app.conftest import World, unique
from tests.app.mail.smtp import Inbox, body_of, mail_server  # noqa: F401
from tests.app.web.test_routes import csrf_of, login

pytestmark = pytest.mark.anyio


def people(world: World) -> str:
    return f"/courses/{world.course.slug}/people"


async def form(client: httpx.AsyncClient, world: World) -> str:
    page = await client.get(people(world))
    assert page.status_code == 200
    return csrf_of(page.text)


def role_of(session: Session, world: World, email: str) -> Role | None:
    session.expire_all()
    user = find_user(session, email=email)
    return None if user is None else role_in(session, user=user, course=world.course)


async def test_tas_see_the_list_and_only_instructors_change_it(
    client: httpx.AsyncClient, world: World
) -> None:
    await login(client, world.student)
    assert (await client.get(people(world))).status_code == 403
    client.cookies.clear()
    await login(client, world.ta)
    page = (await client.get(people(world))).text
    assert world.student.email in page and world.instructor.email in page
    assert 'id="add-person"' not in page and "Only instructors change" in page
    r = await client.post(
        f"{people(world)}/add", data={"email": "x@uni.edu", "csrf_token": csrf_of(page)}
    )
    assert r.status_code == 403


async def test_an_instructor_adds_changes_and_removes_a_person_without_mail(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    await login(client, world.instructor)
    email = f"{unique('new')}@uni.edu"
    r = await client.post(
        f"{people(world)}/add",
        data={
            "email": email,
            "name": "New Person",
            "role": "ta",
            "invite": "true",
            "csrf_token": await form(client, world),
        },
    )
    # No mail server: the link is on the page, once, for the instructor to pass on.
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    assert f"Added {email} as a ta" in r.text
    assert re.search(
        rf"{re.escape(email)}: <code class=\"link\">http://\S+/invite/\S+</code>", r.text
    )
    assert role_of(session, world, email) is Role.ta
    r = await client.post(
        f"{people(world)}/add", data={"email": email, "csrf_token": await form(client, world)}
    )
    assert r.status_code == 409 and "already a ta" in r.text
    r = await client.post(
        f"{people(world)}/role",
        data={"email": email, "role": "student", "csrf_token": await form(client, world)},
    )
    assert r.status_code == 303 and role_of(session, world, email) is Role.student
    r = await client.post(
        f"{people(world)}/remove", data={"email": email, "csrf_token": await form(client, world)}
    )
    assert r.status_code == 303 and role_of(session, world, email) is None
    assert find_user(session, email=email) is not None  # the account stays


async def test_the_last_instructor_cannot_be_removed_or_demoted(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    await login(client, world.instructor)
    me = world.instructor.email
    for action, extra in (("remove", {}), ("role", {"role": "ta"})):
        r = await client.post(
            f"{people(world)}/{action}",
            data={"email": me, **extra, "csrf_token": await form(client, world)},
        )
        assert r.status_code == 409 and "last instructor" in r.text, action
    assert role_of(session, world, me) is Role.instructor


async def test_an_invite_is_mailed_and_resent_through_smtp(
    client: httpx.AsyncClient,
    world: World,
    mail_server: Inbox,  # noqa: F811
) -> None:
    await login(client, world.instructor)
    email = f"{unique('mailed')}@uni.edu"
    r = await client.post(
        f"{people(world)}/add",
        data={"email": email, "invite": "true", "csrf_token": await form(client, world)},
    )
    assert r.status_code == 303 and "Sent%201%20link" in r.headers["location"]
    r = await client.post(
        f"{people(world)}/invite", data={"email": email, "csrf_token": await form(client, world)}
    )
    assert r.status_code == 303
    outbox.wait_until_sent()
    first, second = mail_server.to(email)
    assert world.course.title in first["Subject"]
    links = [re.search(r"/invite/(\S+)", body_of(m)) for m in (first, second)]
    assert all(links) and links[0].group(1) != links[1].group(1)  # type: ignore[union-attr]
    # The newer link replaced the older one.
    assert (await client.get(f"/invite/{links[0].group(1)}")).status_code == 404  # type: ignore[union-attr]
    assert (await client.get(f"/invite/{links[1].group(1)}")).status_code == 200  # type: ignore[union-attr]


async def test_a_roster_is_previewed_then_applied(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    await login(client, world.instructor)
    fresh = f"{unique('fresh')}@uni.edu"
    roster = (
        "email,name,role\n"
        f"{fresh},Fresh Student,\n"
        f"{world.student.email},,student\n"  # unchanged
        f"{world.other_student.email},,ta\n"  # a new role
        "not-an-address,,\n"
        f"{fresh},again,\n"
    )
    r = await client.post(
        f"{people(world)}/roster",
        data={"csrf_token": await form(client, world)},
        files={"file": ("roster.csv", roster.encode(), "text/csv")},
    )
    assert r.status_code == 200
    summary = re.sub(r"\s+", " ", r.text.split('id="summary">', 1)[1].split("</p>", 1)[0])
    # In the conditional, as nothing is done yet; the new account is made only on applying
    # (issue 36, item 9: it said "made now" beside "Nothing has changed yet").
    assert summary == (
        "Applying this roster would add 1 (1 of them without an account yet: applying makes "
        "it), give 1 a new role, remove 0, and leave 1 as the file already says; 2 lines cannot "
        "be used. Nothing has changed yet: no account is made and no one is added until you "
        "apply."
    )
    assert "made now" not in r.text
    assert "Line 5" in r.text and "Line 6" in r.text
    # Nothing changed yet: not even the new account.
    assert find_user(session, email=fresh) is None
    assert role_of(session, world, fresh) is None
    assert role_of(session, world, world.other_student.email) is Role.student
    digest = re.search(r'name="digest" value="([0-9a-f]+)"', r.text)
    assert digest
    apply = {"roster": roster, "digest": digest.group(1), "csrf_token": csrf_of(r.text)}
    done = await client.post(f"{people(world)}/roster/apply", data=apply)
    assert done.status_code == 303 and "1%20added" in done.headers["location"]
    assert role_of(session, world, fresh) is Role.student
    assert role_of(session, world, world.other_student.email) is Role.ta


async def test_applying_a_roster_after_the_course_changed_previews_again(
    client: httpx.AsyncClient, world: World, session: Session
) -> None:
    await login(client, world.instructor)
    roster = f"email\n{world.student.email}\n"
    r = await client.post(
        f"{people(world)}/roster",
        data={"csrf_token": await form(client, world), "remove_missing": "true"},
        files={"file": ("roster.csv", roster.encode(), "text/csv")},
    )
    assert world.other_student.email in r.text.split('id="removals"', 1)[1]
    digest = re.search(r'name="digest" value="([0-9a-f]+)"', r.text)
    assert digest
    # Meanwhile someone else enrols another student, whom the roster would remove too.
    late = f"{unique('late')}@uni.edu"
    await client.post(
        f"{people(world)}/add", data={"email": late, "csrf_token": await form(client, world)}
    )
    again = await client.post(
        f"{people(world)}/roster/apply",
        data={
            "roster": roster,
            "digest": digest.group(1),
            "remove_missing": "true",
            "csrf_token": csrf_of(r.text),
        },
    )
    assert again.status_code == 200 and "changed since you previewed" in again.text
    assert late in again.text.split('id="removals"', 1)[1]
    kept = session.scalars(
        select(Enrollment.id).where(Enrollment.course_id == world.course.id)
    ).all()
    assert len(kept) == 5  # the world's four members and the late one: nothing removed yet
